"""The MCP endpoint (``/mcp``): the official SDK's ``MCPServer`` over streamable HTTP, in the API's process.

- Auth: the SDK's bearer middleware with :class:`api.mcp.auth.KeyVerifier` (mnemo's API keys); no key → 401.
- Stateless transport: every POST is served on its own, so nothing about a session lives in one process
  and a restart (a deploy that switches the legacy tools) loses nothing. The session id the server hands
  out at ``initialize`` *names the catalog* it was opened on: ``<catalog sha256>.<random>``; the client
  sends it back on every request, and a ``tools/call`` on a session whose catalog is no longer the
  caller's current one (another deploy, another audience's key) gets ``stale_session``: re-initialize and
  list the tools again. The hash is also in the ``initialize`` instructions and in ``mnemo mcp manifest``.
- :class:`CatalogGate` offers each audience its catalog only (``tools/list``) and refuses a tool outside it
  with ``tool_not_available`` before any handler runs. There is no server-to-client stream: GET is a 405.
"""

from __future__ import annotations

import json
import uuid
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InitializeResult, ListToolsResult
from pydantic import BaseModel
from starlette.datastructures import State
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import REFUSED, Refused, error_body
from api.mcp import legacy, task_tools, tools
from api.mcp.answers import failure
from api.mcp.arguments import check_arguments
from api.mcp.auth import AUTH_SETTINGS, KeyVerifier, principal_of
from api.mcp.manifest import Manifest, build_manifest
from api.settings import Settings
from memory.errors import MnemoError
from memory.resources.catalog import Catalog, audience_of
from memory.resources.declarations import Audience

PATH = "/mcp"
SESSION_HEADER = "mcp-session-id"
PARSE_ERROR = -32700
"""JSON-RPC's code for a body that cannot be taken as a request."""
_SESSION_SCOPE_KEY = "mnemo.mcp_session_id"
Ctx = ServerRequestContext[Any, Any]


class Catalogs:
    """The manifest of each audience, built once from the server's registered tools."""

    def __init__(self, server: MCPServer[Any], catalog: Catalog, legacy_tools: bool) -> None:
        self._server, self._catalog, self._legacy = server, catalog, legacy_tools
        self._built: dict[Audience, Manifest] = {}

    async def of(self, audience: Audience) -> Manifest:
        if audience not in self._built:
            self._built[audience] = await build_manifest(self._server, self._catalog, audience, self._legacy)
        return self._built[audience]


def session_catalog(session_id: str | None) -> str | None:
    """The catalog hash a session id names (None: no session, or not one of ours)."""
    if session_id is None or "." not in session_id:
        return None
    return session_id.split(".", 1)[0]


class CatalogGate:
    """SDK middleware: the caller's catalog decides what is listed and what may be called."""

    def __init__(self, catalogs: Catalogs) -> None:
        self._catalogs = catalogs

    async def __call__(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        if ctx.method not in {"initialize", "tools/list", "tools/call"} or not isinstance(ctx.request, Request):
            return await call_next(ctx)
        # The SDK's bearer middleware let only a valid key through, so the principal is there.
        manifest = await self._catalogs.of(audience_of(principal_of(ctx.request)))
        if ctx.method == "initialize":
            ctx.request.scope[_SESSION_SCOPE_KEY] = f"{manifest.sha256}.{uuid.uuid4().hex}"
            opened = InitializeResult.model_validate(_plain(await call_next(ctx)))
            return opened.model_copy(update={"instructions": instructions(manifest)})
        if ctx.method == "tools/list":
            listed = ListToolsResult.model_validate(_plain(await call_next(ctx)))
            return listed.model_copy(update={"tools": [t for t in listed.tools if t.name in manifest.tool_names]})
        return await self._call(ctx, ctx.request, call_next, manifest)

    async def _call(self, ctx: Ctx, request: Request, call_next: CallNext, manifest: Manifest) -> HandlerResult:
        opened_on = session_catalog(request.headers.get(SESSION_HEADER))
        if opened_on is not None and opened_on != manifest.sha256:
            return failure("stale_session", f"this session was opened on catalog {opened_on[:12]}…, the current one is "
                           f"{manifest.sha256[:12]}…: initialize a new session and list the tools again",
                           {"session_catalog": opened_on, "current_catalog": manifest.sha256})
        params = ctx.params or {}
        tool = manifest.tool(params.get("name"))
        if tool is None:
            available = sorted(manifest.tool_names)
            return failure("tool_not_available", f"no tool {params.get('name')!r} here; available: "
                           f"{', '.join(available)}", {"available": available})
        try:
            check_arguments(tool["name"], tool["inputSchema"], params.get("arguments") or {})
        except MnemoError as error:
            return failure(error.code, error.message, error.details)
        result = await call_next(ctx)
        if isinstance(result, CallToolResult) and result.is_error and result.structured_content is None:
            # Not one of mnemo's errors (those carry their body): an unexpected failure, logged by the SDK.
            return failure("internal_error", f"{tool['name']} failed unexpectedly; the server log has the traceback")
        return result


def _plain(result: HandlerResult) -> Any:
    """A handler's result as wire JSON (handlers may answer a model or a dict)."""
    return result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result


def instructions(manifest: Manifest) -> str:
    return (f"mnemo ({manifest.audience.value} catalog sha256:{manifest.sha256}). Discover with list(), find "
            "candidates with search(query), read one by its ref with read(ref), following next_cursor to the end.")


class SessionIds:
    """ASGI layer in front of the SDK app: hands out the session id :class:`CatalogGate` chose at initialize
    (the SDK's app passes its scope dict down unchanged, so what the gate writes into the request's scope is
    here when the response starts), and answers an authenticated GET (a server-to-client stream, which a
    stateless server does not keep) with 405, and a body the API's guard refused with a JSON-RPC parse error
    naming the refusal; without a valid key either is the 401 a POST gets."""

    def __init__(self, app: ASGIApp, verifier: KeyVerifier) -> None:
        self._app, self._verifier = app, verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await self._refuse(scope, send, 405, error_body("method_not_allowed", "this MCP server keeps no "
                                                            "server-to-client stream"), [(b"allow", b"POST, DELETE")])
            return
        refused: Refused | None = scope.get(REFUSED)
        if scope["type"] == "http" and refused is not None:
            # The API's body guard refused it (a duplicate key, a NUL, ...) and left the SDK an empty body, which it
            # would call "EOF while parsing": say what was refused, as a JSON-RPC parse error carrying mnemo's error.
            error = error_body(refused.code, refused.message)["error"]
            await self._refuse(scope, send, 400, {"jsonrpc": "2.0", "id": None,
                                                  "error": {"code": PARSE_ERROR, "message": refused.message,
                                                            "data": error}})
            return

        async def send_with_session(message: Message) -> None:
            session_id = scope.get(_SESSION_SCOPE_KEY)
            if message["type"] == "http.response.start" and session_id is not None:
                message = {**message, "headers": [*message.get("headers", []),
                                                  (SESSION_HEADER.encode(), session_id.encode("ascii"))]}
            await send(message)

        await self._app(scope, receive, send_with_session)

    async def _refuse(self, scope: Scope, send: Send, status: int, body: dict[str, Any],
                      headers: list[tuple[bytes, bytes]] | None = None) -> None:
        """Answer ``status`` with ``body`` to a caller with a valid key; without one, the 401 the SDK would give."""
        scheme, _, token = Request(scope).headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and await self._verifier.verify_token(token.strip()) is not None:
            headers = headers or []
        else:  # as the SDK's bearer middleware answers a POST
            status, body = 401, {"error": "invalid_token", "error_description": "Authentication required"}
            headers = [(b"www-authenticate", b'Bearer error="invalid_token"')]
        encoded = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(encoded)).encode()), *headers]})
        await send({"type": "http.response.body", "body": encoded})


class McpEndpoint:
    """What the API mounts at :data:`PATH` (:attr:`asgi`) and runs in its lifespan (:meth:`running`)."""

    def __init__(self, settings: Settings, state: State, catalog: Catalog) -> None:
        self.usage = legacy.LegacyUsage()
        verifier = KeyVerifier(lambda: state.engine)
        # The instructions are each session's own (its catalog's hash): CatalogGate writes them at initialize.
        self.server: MCPServer[Any] = MCPServer("mnemo", version="0.1.0", token_verifier=verifier, auth=AUTH_SETTINGS)
        tools.register(self.server, state)
        task_tools.register(self.server, state)
        if settings.mcp_legacy_tools:
            legacy.register(self.server, state, self.usage)
        self.catalogs = Catalogs(self.server, catalog, settings.mcp_legacy_tools)
        self.server.middleware.append(CatalogGate(self.catalogs))
        sdk_app = self.server.streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True,
            # DNS-rebinding protection guards servers that trust whoever can reach them; every request here
            # must carry an API key, and the Host a deployment is reached by is not known here.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.asgi = SessionIds(sdk_app, verifier)

    def running(self) -> AbstractAsyncContextManager[None]:
        """The SDK's session manager, run inside the API's lifespan (it serves no request outside it)."""
        return self.server.session_manager.run()
