"""The ``mnemo`` command line: the embedded dev stack, production services and admin commands."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from api.settings import Settings
from api.task_cli import task_app

app = typer.Typer(help="mnemo: governed memory and durable tasks for AI agents.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
admin_app = typer.Typer(help="Operator commands.", no_args_is_help=True)
app.add_typer(admin_app, name="admin")
app.add_typer(task_app, name="task")

DataDir = Annotated[
    Path, typer.Option("--data-dir", envvar="MNEMO_DATA_DIR", help="Data directory of the embedded stack.")
]


def fail(message: str) -> None:
    typer.echo(f"mnemo: {message}", err=True)
    raise typer.Exit(1)


@app.command()
def dev(
    data_dir: DataDir = Path(".mnemo"),
    port: Annotated[int, typer.Option(help="API port on 127.0.0.1.")] = 8000,
    temporal_port: Annotated[int, typer.Option(help="Temporal frontend port (its UI uses this + 1000).")] = 7233,
    demo: Annotated[bool, typer.Option(help="Write and recall one demo memory once ready.")] = True,
) -> None:
    """Run the whole stack locally: embedded PostgreSQL, Temporal dev server, worker and API."""
    from api.demo import run_demo
    from api.devstack.stack import DevOptions, run_dev

    options = DevOptions(data_dir=data_dir, port=port, temporal_port=temporal_port)
    raise typer.Exit(run_dev(options, run_demo if demo else None))


@app.command()
def migrate() -> None:
    """Apply database migrations to MNEMO_DATABASE_URL."""
    from migrations import upgrade

    upgrade(Settings().require_database_url())
    typer.echo("mnemo: database schema is up to date")


@app.command()
def worker() -> None:
    """Run the Temporal worker against MNEMO_DATABASE_URL and MNEMO_TEMPORAL_ADDRESS."""
    from api.worker import run_worker

    settings = Settings()
    settings.require_database_url()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop)

    asyncio.run(main())
    # The worker has shut down cleanly. Skip interpreter finalisation: the SDK's native threads
    # can still call into Python while it runs and abort the process (PyGILState_Release).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@app.command()
def api() -> None:
    """Serve the HTTP API (uvicorn) on MNEMO_API_HOST:MNEMO_API_PORT."""
    import uvicorn

    from api.httpserver import BoundedHttpToolsProtocol
    from api.main import create_app

    settings = Settings()
    settings.require_database_url()
    uvicorn.run(
        lambda: create_app(settings),
        factory=True,
        host=settings.api_host,
        port=settings.api_port,
        log_level=settings.log_level,
        http=BoundedHttpToolsProtocol,  # httptools with a bounded request head (431)
    )


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant id (created if it does not exist).")],
    user: Annotated[str, typer.Option(help="User id the key authenticates as.")],
    roles: Annotated[str, typer.Option(help="Comma-separated roles, e.g. memory_writer,approver.")] = "",
    agent: Annotated[str | None, typer.Option(help="Bind the key to an agent (for AGENT space memories).")] = None,
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Create an API key and print it, alone, on stdout. It is shown this once."""
    from memory.auth import create_api_key
    from memory.db import make_engine, tenant_session
    from memory.errors import MnemoError

    url = _service_settings(data_dir).require_database_url()
    engine = make_engine(url, pool_size=1)
    try:
        with tenant_session(engine, tenant) as session:
            key = create_api_key(
                session, tenant_id=tenant, user_id=user, agent_id=agent, roles=roles.split(",") if roles else []
            )
    except MnemoError as exc:
        fail(exc.message)
    finally:
        engine.dispose()
    sys.stdout.write(key + "\n")


@admin_app.command("rebuild-projection")
def admin_rebuild_projection(
    tenant: Annotated[str, typer.Option(help="Tenant whose search projection is re-derived.")],
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Re-derive a tenant's search projection from its memories (a Temporal workflow), and wait for it."""
    from api.temporal import connect, start_projection_rebuild

    settings = _service_settings(data_dir)

    async def run() -> None:
        client = await connect(settings)
        handle = await start_projection_rebuild(client, settings.task_queue, tenant)
        typer.echo(f"mnemo: workflow {handle.id} started; waiting…", err=True)
        result = await handle.result()
        typer.echo(f"mnemo: rebuilt {result.rebuilt} memories in {result.batches} batch(es)")

    asyncio.run(run())


@app.command()
def backup(
    out: Annotated[Path, typer.Option("--out", help="Archive to write (pg_dump custom format).")],
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Back up the database (MNEMO_DATABASE_URL, or the running `mnemo dev`)."""
    from api.backup import BackupError
    from api.backup import backup as run_backup

    try:
        run_backup(_service_settings(data_dir).require_database_url(), out)
    except BackupError as exc:
        fail(str(exc))
    typer.echo(f"mnemo: backup written to {out}")


@app.command()
def restore(
    archive: Annotated[Path, typer.Argument(help="An archive written by `mnemo backup`.")],
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Restore a backup; tombstones of deletions made since are re-applied before it goes live."""
    from api.backup import BackupError
    from api.backup import restore as run_restore

    try:
        report = run_restore(_service_settings(data_dir).require_database_url(), archive)
    except BackupError as exc:
        fail(str(exc))
        raise
    typer.echo(
        f"mnemo: restored {archive}; re-applied {report.tombstones} tombstone(s) in {report.tenants} tenant(s), "
        f"scrubbing {report.rows_scrubbed} row(s)"
    )


def _service_settings(data_dir: Path) -> Settings:
    """Production settings from the environment, or those of the running ``mnemo dev`` in ``data_dir``."""
    if os.environ.get("MNEMO_DATABASE_URL"):
        return Settings()
    from api.devstack.processes import StackError
    from api.devstack.stack import read_state

    try:
        state = read_state(data_dir)
    except StackError as exc:
        fail(str(exc))
        raise
    return Settings(database_url=str(state["database_url"]), temporal_address=str(state["temporal_address"]))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
