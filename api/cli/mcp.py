"""``mnemo mcp``: the MCP catalog as the running API would offer it (no database needed)."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer

from api.settings import Settings
from memory.resources.declarations import Audience

mcp_app = typer.Typer(help="The MCP endpoint (/mcp).", no_args_is_help=True)


@mcp_app.command()
def manifest(
    audience: Annotated[Audience, typer.Option(help="Whose catalog: internal keys, or public_client keys.")]
    = Audience.INTERNAL,
) -> None:
    """Print the catalog (tools with input/output schemas, resource types) and its sha256, as JSON.

    It follows the same settings as the API (MNEMO_MCP_LEGACY_TOOLS, MNEMO_RESOURCE_DECLARATIONS_DIR), so the
    hash printed here is the one a session opened on that API names.
    """
    # Here, not at the top: the MCP server (the SDK among it) is a second of imports every `mnemo` command paid.
    from starlette.datastructures import State

    from api.mcp.server import McpEndpoint
    from memory.resources.catalog import load_catalog

    settings = Settings()
    endpoint = McpEndpoint(settings, State(), load_catalog(settings.resource_declarations_dir))
    built = asyncio.run(endpoint.catalogs.of(audience))
    typer.echo(json.dumps(built.as_json(), ensure_ascii=False, indent=2, sort_keys=True))
