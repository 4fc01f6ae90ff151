"""Who calls the MCP endpoint: mnemo's own API keys, through the SDK's token-verifier hook.

The SDK's bearer middleware hands every request's token to :class:`KeyVerifier`, which checks it exactly as
the REST API does (:func:`memory.identity.auth.authenticate`); a missing, unknown, expired or revoked key is refused
with the SDK's 401 before any MCP message is read. Identity is the key's, never a tool argument's. The
access (run, grants) is computed again for every tool call (:func:`access_of`), so a revocation applies to
the very next call.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from pydantic import AnyHttpUrl
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from api.access import RUN_HEADER, THREAD_HEADER
from api.observability.logging import bind_tenant
from memory.db import global_session
from memory.errors import Unauthorized
from memory.identity.auth import PrincipalContext, authenticate
from memory.resources.access import Access
from memory.resources.catalog import Catalog
from memory.resources.runs import access_for

AUTH_SETTINGS = AuthSettings(
    # The SDK wants an issuer for OAuth metadata; mnemo issues its keys itself and publishes no OAuth metadata
    # (no resource_server_url), so this URL is never served or followed.
    issuer_url=AnyHttpUrl("http://mnemo.invalid"),
    resource_server_url=None,
)


class KeyToken(AccessToken):
    """The SDK's access token, carrying the principal the key authenticated."""

    principal: PrincipalContext


class KeyVerifier:
    """:class:`mcp.server.auth.provider.TokenVerifier` over mnemo's API keys."""

    def __init__(self, engine: Callable[[], Engine]) -> None:
        self._engine = engine

    async def verify_token(self, token: str) -> AccessToken | None:
        def check() -> PrincipalContext | None:
            try:
                with global_session(self._engine()) as session:
                    return authenticate(session, token)
            except Unauthorized:
                return None

        principal = await run_in_threadpool(check)
        if principal is None:
            return None
        bind_tenant(principal.tenant_id)  # the request's log lines name its tenant, as REST's do
        # client_id and subject are what the SDK binds a session to: the key, and whom it speaks for.
        return KeyToken(token=token, client_id=principal.key_id, scopes=[],
                        subject=f"{principal.tenant_id}/{principal.user_id}", principal=principal)


def request_of(ctx: Context[Any, Any]) -> Request:
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise Unauthorized("the MCP endpoint is served over HTTP only")
    return request


def principal_of(request: Request) -> PrincipalContext:
    """The principal of the request's key (set by the SDK's bearer middleware through :class:`KeyVerifier`)."""
    user = request.scope.get("user")
    if not isinstance(user, AuthenticatedUser) or not isinstance(user.access_token, KeyToken):
        raise Unauthorized("send your API key as `Authorization: Bearer mnemo_...`")
    return user.access_token.principal


async def access_of(request: Request, engine: Engine, catalog: Catalog) -> Access:
    """The access of this call, from the key and the ``X-Mnemo-Run`` / ``X-Mnemo-Thread`` headers, as REST."""
    principal = principal_of(request)
    run, thread = request.headers.get(RUN_HEADER), request.headers.get(THREAD_HEADER)

    return await run_in_threadpool(partial(access_for, engine, principal, catalog, run_id=run, thread_id=thread))
