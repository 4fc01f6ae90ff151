"""The four tools of the old memo MCP (seed 000 §7), kept as a bounded compatibility adapter.

They exist only while ``MNEMO_MCP_LEGACY_TOOLS`` is on (off by default), each is one call of the same reader
list / search / read use (no second read path), and every call is counted: a log line
(``mnemo.mcp.legacy``) and an in-process counter per tenant and tool, read by an admin at
``GET /mcp-legacy-usage``. Removal condition (README, "MCP"): the adapter goes once, with the switch on, no
tenant has called it for 30 consecutive days (read from the log lines: the counter restarts with the process).

| legacy tool | the reader call |
| --- | --- |
| ``search_memory {query, top_k?}`` | ``search(query, top_k=top_k)`` across every permitted type |
| ``get_transcript {transcript_id, cursor?}`` | ``read("transcript:<id>", cursor)`` |
| ``list_recordings {cursor?}`` | ``list("voice_memo", {}, cursor)`` |
| ``list_todos {status?, cursor?}`` | ``list("todo", {"status": status}, cursor)`` |
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Request
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel
from starlette.datastructures import State

from api.deps import CurrentPrincipal
from api.mcp.answers import with_access
from api.mcp.auth import principal_of, request_of
from api.mcp.tools import TopK
from memory.enums import Role
from memory.identity.auth import require_role
from memory.resources.results import ListPage, ReadPage, SearchResult

log = logging.getLogger("mnemo.mcp.legacy")

LEGACY_RESOURCES: dict[str, str | None] = {
    "search_memory": None,
    "get_transcript": "transcript",
    "list_recordings": "voice_memo",
    "list_todos": "todo",
}
"""Each legacy tool and the one resource type it reads (None: every type): offered to an audience only when
that type is in the audience's catalog, so a public key is never offered get_transcript."""


class LegacyUsage:
    """Calls per (tenant, legacy tool) since the process started; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: Counter[tuple[str, str]] = Counter()

    def count(self, ctx: Context[Any, Any], tool: str) -> None:
        """One call of ``tool`` by the caller's tenant, counted before it runs (a refused call counts too)."""
        tenant = principal_of(request_of(ctx)).tenant_id
        with self._lock:
            self._calls[(tenant, tool)] += 1
        log.info("legacy MCP tool called: tool=%s tenant=%s", tool, tenant)

    def of_tenant(self, tenant_id: str) -> dict[str, int]:
        with self._lock:
            counts = {tool: self._calls[(tenant, tool)] for tenant, tool in self._calls if tenant == tenant_id}
        return {tool: counts.get(tool, 0) for tool in LEGACY_RESOURCES}


def register(server: MCPServer[Any], state: State, usage: LegacyUsage) -> None:
    @server.tool(name="search_memory", description="Legacy: search across your resources. Prefer `search`.")
    async def search_memory(ctx: Context[Any, Any], query: str,
                            top_k: TopK | None = None) -> Annotated[CallToolResult, SearchResult]:
        usage.count(ctx, "search_memory")
        return await with_access(ctx, state, lambda access: state.reader.search(access, query, None, top_k))

    @server.tool(name="get_transcript", description="Legacy: one transcript, page by page. Prefer "
                 "`read` with ref transcript:<id>.")
    async def get_transcript(ctx: Context[Any, Any], transcript_id: str,
                             cursor: str | None = None) -> Annotated[CallToolResult, ReadPage]:
        usage.count(ctx, "get_transcript")
        return await with_access(
            ctx, state, lambda access: state.reader.read(access, f"transcript:{transcript_id}", cursor))

    @server.tool(name="list_recordings", description="Legacy: your voice memos. Prefer `list` with "
                 "resource voice_memo.")
    async def list_recordings(ctx: Context[Any, Any],
                              cursor: str | None = None) -> Annotated[CallToolResult, ListPage]:
        usage.count(ctx, "list_recordings")
        return await with_access(ctx, state, lambda access: state.reader.list(access, "voice_memo", {}, cursor))

    @server.tool(name="list_todos", description="Legacy: your todos, optionally by status. Prefer `list` "
                 "with resource todo.")
    async def list_todos(ctx: Context[Any, Any], status: str | None = None,
                         cursor: str | None = None) -> Annotated[CallToolResult, ListPage]:
        usage.count(ctx, "list_todos")
        filters = {"status": status} if status is not None else {}
        return await with_access(ctx, state, lambda access: state.reader.list(access, "todo", filters, cursor))


class LegacyUsageOut(BaseModel):
    enabled: bool
    calls: dict[str, int]
    """Per legacy tool, calls by the caller's tenant since this API process started."""


router = APIRouter(tags=["mcp"])


@router.get("/mcp-legacy-usage")
def legacy_usage(principal: CurrentPrincipal, request: Request) -> LegacyUsageOut:
    """The legacy MCP tools' calls by the caller's tenant, counted in this process (admin, operator)."""
    require_role(principal, Role.ADMIN, Role.OPERATOR, to="reading legacy MCP usage")
    usage: LegacyUsage = request.app.state.mcp_legacy_usage
    return LegacyUsageOut(enabled=request.app.state.settings.mcp_legacy_tools,
                          calls=usage.of_tenant(principal.tenant_id))
