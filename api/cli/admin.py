"""``mnemo admin …``: operator commands that run a Temporal workflow and wait for it."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from api.cli.database import service_settings
from api.cli.hints import DEFAULT_DATA_DIR
from api.cli.options import StackDataDir

admin_app = typer.Typer(help="Operator commands.", no_args_is_help=True)


@admin_app.command("rebuild-projection")
def admin_rebuild_projection(
    tenant: Annotated[str, typer.Option(help="Tenant whose search projection is re-derived.")],
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """Re-derive a tenant's search projection from its memories (a Temporal workflow), and wait for it."""
    from api.temporal import connect, start_projection_rebuild

    settings = service_settings(data_dir)

    async def run() -> None:
        client = await connect(settings)
        handle = await start_projection_rebuild(client, settings.task_queue, tenant)
        typer.echo(f"mnemo: workflow {handle.id} started; waiting…", err=True)
        result = await handle.result()
        typer.echo(f"mnemo: rebuilt {result.rebuilt} memories in {result.batches} batch(es)")

    asyncio.run(run())
