"""FastAPI dependencies: the engine, the Temporal client and the authenticated principal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine
from temporalio.client import Client

from api.errors import TemporalUnavailable
from api.settings import Settings
from api.temporal import connect

from memory.auth import PrincipalContext, authenticate
from memory.db import global_session
from memory.errors import Unauthorized


async def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


EngineDep = Annotated[Engine, Depends(get_engine)]


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
"""For handlers that check the key inside their own transaction (:func:`memory.auth.authenticated_session`)."""


def current_principal(key: PresentedKey, engine: EngineDep) -> PrincipalContext:
    """The principal of the request's key, checked in a transaction of its own."""
    with global_session(engine) as session:
        return authenticate(session, key)


CurrentPrincipal = Annotated[PrincipalContext, Depends(current_principal)]


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def get_temporal(request: Request) -> Client:
    """The shared Temporal client, connected on first use (the API starts even while Temporal is down)."""
    if request.app.state.temporal is None:
        try:
            request.app.state.temporal = await connect(request.app.state.settings)
        except Exception as exc:  # the SDK raises a plain RuntimeError when it cannot connect
            raise TemporalUnavailable(f"Temporal is not reachable: {exc}") from exc
    client: Client = request.app.state.temporal
    return client


TemporalDep = Annotated[Client, Depends(get_temporal)]
