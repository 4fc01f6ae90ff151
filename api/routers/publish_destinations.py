"""A tenant's publish destinations (:mod:`memory.tasks.destinations`): an admin sets or removes them, any of the
tenant's own keys lists them (never a secret)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import CurrentPrincipal, EngineDep, SettingsDep
from api.schemas.publish_destinations import DestinationIn, DestinationListOut, DestinationOut
from memory.db import tenant_session
from memory.errors import NotFound
from memory.tasks.destinations import (
    LISTED_BUILT_INS,
    Destination,
    destination,
    destinations,
    put_destination,
    remove_destination,
)

router = APIRouter(tags=["publish destinations"])


def _out(found: Destination) -> DestinationOut:
    return DestinationOut(name=found.name, kind=found.kind, url=found.url, secret_set=found.secret is not None,
                          created_by=found.created_by, updated_at=found.updated_at.isoformat())


def _built_in(name: str) -> DestinationOut:
    return DestinationOut(name=name, kind="archive", built_in=True)


@router.put(
    "/publish-destinations/{name}",
    response_model=DestinationOut,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": DestinationOut, "description": "The destination existed: same body, or updated"}},
)
def put(
    name: str, body: DestinationIn, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep,
    response: Response,
) -> DestinationOut:
    """An admin creates (201) or replaces (200) a destination; a webhook's url must reach a public address
    unless ``MNEMO_WEBHOOK_ALLOWED_HOSTS`` names it, and is judged again at every delivery."""
    with tenant_session(engine, principal.tenant_id) as session:
        found, created = put_destination(session, principal, name, body.kind, body.url, body.secret,
                                         settings.webhook_allow_list())
    if not created:
        response.status_code = status.HTTP_200_OK
    return _out(found)


@router.get("/publish-destinations", response_model=DestinationListOut)
def list_all(principal: CurrentPrincipal, engine: EngineDep) -> DestinationListOut:
    """The built-in destinations, then the tenant's own by name."""
    with tenant_session(engine, principal.tenant_id) as session:
        own = destinations(session, principal.tenant_id)
    return DestinationListOut(items=[*map(_built_in, LISTED_BUILT_INS), *map(_out, own)])


@router.get("/publish-destinations/{name}", response_model=DestinationOut)
def get(name: str, principal: CurrentPrincipal, engine: EngineDep) -> DestinationOut:
    if name in LISTED_BUILT_INS:
        return _built_in(name)
    with tenant_session(engine, principal.tenant_id) as session:
        found = destination(session, principal.tenant_id, name)
    if found is None:
        raise NotFound(f"publish destination {name!r} does not exist")
    return _out(found)


@router.delete("/publish-destinations/{name}", status_code=204)
def delete(name: str, principal: CurrentPrincipal, engine: EngineDep) -> Response:
    """Refused (409 ``destination_in_use``) while an open task of the tenant will publish there."""
    with tenant_session(engine, principal.tenant_id) as session:
        remove_destination(session, principal, name)
    return Response(status_code=204)
