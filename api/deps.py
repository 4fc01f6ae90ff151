"""FastAPI dependencies and the checks every router shares: the engine, the artifact store, the settings, the
Temporal client (and its lazy source for services), the app's query embedding lanes, the authenticated principal
and the 401 that comes before any 422 (:func:`refusal_of_key`), its roles (:func:`require_role`) and path ids
(:func:`parse_id`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State
from temporalio.client import Client

from api.limits import EmbeddingLanes
from api.observability.logging import bind_tenant
from api.services.client import ClientSource, TemporalUnavailable
from api.settings import Settings
from api.temporal import connect
from memory.artifact_store import ArtifactStore
from memory.db import global_session
from memory.errors import Forbidden, Unauthorized
from memory.identity.auth import PrincipalContext, authenticate
from memory.resources.catalog import Catalog, only_internal


async def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


EngineDep = Annotated[Engine, Depends(get_engine)]


async def get_catalog(request: Request) -> Catalog:
    catalog: Catalog = request.app.state.catalog
    return catalog


CatalogDep = Annotated[Catalog, Depends(get_catalog)]


async def get_artifacts(request: Request) -> ArtifactStore:
    artifacts: ArtifactStore = request.app.state.artifacts
    return artifacts


ArtifactsDep = Annotated[ArtifactStore, Depends(get_artifacts)]


BEARER = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer mnemo_...`")
"""Only to document the key in the OpenAPI (``security`` on every operation that takes one); the header is
read and refused by :func:`key_of` with mnemo's own error body."""


def key_of(authorization: str) -> str:
    """The API key of an ``Authorization: Bearer <key>`` header value, not yet checked."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("send your API key as `Authorization: Bearer mnemo_...`")
    return token.strip()


async def presented_key(
    request: Request, _documented: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None
) -> str:
    """The API key of ``Authorization: Bearer <key>``, not yet checked (identity comes only from it)."""
    return key_of(request.headers.get("authorization", ""))


PresentedKey = Annotated[str, Depends(presented_key)]
"""For handlers that check the key inside their own transaction (:func:`memory.identity.auth.authenticated_session`)."""


PUBLIC_READS = frozenset({("GET", "/resources"), ("GET", "/resources/{resource}"), ("POST", "/resources/search"),
                          ("POST", "/resources/read")})
"""The routes a ``public_client`` key may call (and ``/mcp``, outside FastAPI's routing): the public catalog."""


def authenticated(key: str, engine: Engine) -> PrincipalContext:
    """The principal of ``key``, checked in a transaction of its own."""
    with global_session(engine) as session:
        principal = authenticate(session, key)
    bind_tenant(principal.tenant_id)
    return principal


def current_principal(request: Request, key: PresentedKey, engine: EngineDep) -> PrincipalContext:
    """The principal of the request's key; a public client's key is refused everywhere but the public catalog."""
    principal = authenticated(key, engine)
    public_catalog_only(request, principal)
    return principal


def public_catalog_only(request: Request, principal: PrincipalContext) -> None:
    """Refuse a public client's key on any route but :data:`PUBLIC_READS`."""
    route = getattr(request.scope.get("route"), "path", request.url.path)
    if (request.method, route) not in PUBLIC_READS:
        only_internal(principal, f"{request.method} {route}")


CurrentPrincipal = Annotated[PrincipalContext, Depends(current_principal)]


def _needs_key(route: Any) -> bool:
    """Whether the route takes an API key: it depends (at any depth) on :func:`presented_key`."""
    if not isinstance(route, APIRoute):
        return False
    cached: bool | None = getattr(route, "_mnemo_needs_key", None)
    if cached is None:
        cached = False
        pending = [route.dependant]
        while pending and not cached:
            dependant = pending.pop()
            cached = dependant.call is presented_key
            pending.extend(dependant.dependencies)
        route._mnemo_needs_key = cached  # type: ignore[attr-defined]
    return cached


async def refusal_of_key(request: Request) -> Unauthorized | Forbidden | None:
    """The 401 a request without a valid key deserves, or the 403 of a public client's key outside the public
    catalog, if its route takes a key: answered before any 422.

    Only called on an error path, so the extra key check costs a valid caller nothing.
    """
    if not _needs_key(request.scope.get("route")):
        return None
    try:
        key = key_of(request.headers.get("authorization", ""))
        principal = await run_in_threadpool(authenticated, key, request.app.state.engine)
        public_catalog_only(request, principal)
    except (Unauthorized, Forbidden) as exc:
        return exc
    return None


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def app_temporal(state: State) -> Client:
    """The app's Temporal client, connected on first use (the API starts even while Temporal is down); MCP's
    tools, whose requests belong to the MCP sub-app, reach it through the API's ``state``.

    Temporal that cannot be reached is a 503 ``temporal_unavailable`` saying so.
    """
    if state.temporal is None:
        try:
            state.temporal = await connect(state.settings)
        except Exception as exc:  # the SDK raises a plain RuntimeError when it cannot connect
            raise TemporalUnavailable(f"Temporal is not reachable: {exc}") from exc
    client: Client = state.temporal
    return client


async def get_temporal(request: Request) -> Client:
    """:func:`app_temporal` of the request's app. A route that must answer its 404s and 409s before it needs
    Temporal calls this when it does; others take :data:`TemporalDep`."""
    return await app_temporal(request.app.state)


TemporalDep = Annotated[Client, Depends(get_temporal)]


async def temporal_source(request: Request) -> ClientSource:
    """:func:`get_temporal` for this request, not yet called: a service connects only once its own checks
    (the 404 of another user's task, a 409) have passed."""

    async def connected() -> Client:
        return await get_temporal(request)

    return connected


TemporalSource = Annotated[ClientSource, Depends(temporal_source)]


async def get_embedding_lanes(request: Request) -> EmbeddingLanes:
    lanes: EmbeddingLanes = request.app.state.embedding_lanes
    return lanes


EmbeddingLanesDep = Annotated[EmbeddingLanes, Depends(get_embedding_lanes)]
