"""How a tool call is answered: the result model as structured content (the same JSON as REST), or mnemo's
error — its machine ``code`` and human sentence — as an MCP tool error (``isError``), never a silent empty
result. Every call computes its access anew (:func:`api.mcp.auth.access_of`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from api.errors import error_body
from api.mcp.auth import access_of, request_of
from memory.errors import Forbidden, MnemoError
from memory.identity.auth import PrincipalContext
from memory.resources.access import Access, ceiling_grant
from memory.resources.declarations import Operation
from memory.resources.pages import encode

MEMORY = "memory"
"""The resource type of mnemo's memories (memory/resources/builtin/memory.json): what a run's policy grants."""


def success(result: BaseModel) -> CallToolResult:
    """The text is the very body REST sends (:func:`memory.resources.pages.encode`), so the 65,536-byte budget
    the reader measured holds for it too; the structured content is the same JSON, parsed. (The JSON-RPC
    envelope carries both, as the SDK's backwards compatibility asks: that is the transport, not the answer.)"""
    body = encode(result).decode("utf-8")
    return CallToolResult(content=[TextContent(type="text", text=body)], structured_content=json.loads(body))


def failure(code: str, message: str, details: dict[str, Any] | None = None) -> CallToolResult:
    """mnemo's error body (``{"error": {"code", "message", ...}}``) as both text and structured content."""
    body = error_body(code, message, **(details or {}))
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
                          structured_content=body, is_error=True)


async def answer(produce: Callable[[], Awaitable[BaseModel]]) -> CallToolResult:
    """``produce``'s result, or its mnemo error as a tool error (for tools that need no resource access)."""
    try:
        return success(await produce())
    except MnemoError as error:
        return failure(error.code, error.message, error.details)


async def with_access(ctx: Context[Any, Any], state: State, produce: Callable[[Access], BaseModel]) -> CallToolResult:
    """``produce`` over this call's access (key + run headers), in a worker thread; errors as tool errors."""
    try:
        access = await access_of(request_of(ctx), state.engine, state.catalog)
        return success(await run_in_threadpool(produce, access))
    except MnemoError as error:
        return failure(error.code, error.message, error.details)


async def with_memories(ctx: Context[Any, Any], state: State, operation: Operation,
                        produce: Callable[[PrincipalContext], BaseModel]) -> CallToolResult:
    """``produce`` for the key's principal, when this call's access may do ``operation`` on the ``memory`` type
    with every field of it: the memory tools answer whole memories, so a run whose policy narrows the memory
    fields is sent to list / search / read, which apply the field whitelist. Errors as tool errors."""
    try:
        access = await access_of(request_of(ctx), state.engine, state.catalog)
        grant = access.grant(MEMORY, operation)
        ceiling = ceiling_grant(state.catalog.get(MEMORY), access.audience)
        if ceiling is None or set(grant.fields) != set(ceiling.fields):
            raise Forbidden(f"this call may read only some fields of memories ({', '.join(grant.fields)}): use "
                            f"{operation.value}() on the memory resource, which returns those",
                            code="memory_fields_narrowed")
        return success(await run_in_threadpool(produce, access.principal))
    except MnemoError as error:
        return failure(error.code, error.message, error.details)
