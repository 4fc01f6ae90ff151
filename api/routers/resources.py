"""The resource catalog (what the caller's audience may see) and the source records behind it."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.access import ReadAccess
from api.deps import CatalogDep, CurrentPrincipal, EngineDep, SettingsDep
from api.schemas.common import replay_of
from api.schemas.resources import (
    LongFieldOut,
    RecordIn,
    RecordOut,
    RecordWrittenOut,
)
from memory.auth import PrincipalContext
from memory.db import tenant_session
from memory.errors import Forbidden
from memory.resources.bodies import record_store
from memory.resources.catalog import audience_of
from memory.resources.declarations import Audience, Operation
from memory.resources.records import get_record, ref_of, release_bodies, save_record
from memory.resources.results import Directory, DirectoryEntry

router = APIRouter(tags=["resources"])


def not_public(principal: PrincipalContext) -> None:
    """Records are the user's own apps' to write and read back; a public client reads the resources only."""
    if audience_of(principal) is Audience.PUBLIC:
        raise Forbidden("a public_client key reads resources; records are written and read by the user's own keys")


@router.get("/resources")
def list_resources(access: ReadAccess, catalog: CatalogDep) -> Directory:
    """``list()``: the resource types the caller may use now (its run's snapshot ∩ its agent's current policy ∩
    its audience's ceiling), their operations and the fields it may read; a type with no readable field is absent."""
    return Directory(
        audience=access.audience.value,
        run_id=access.run_id,
        resources=[
            DirectoryEntry(
                type=grant.resource,
                description=catalog.get(grant.resource).description,
                operations=[operation.value for operation in Operation if operation in grant.operations],
                fields=list(grant.fields),
            )
            for _, grant in sorted(access.grants.items())
        ],
    )


@router.put("/records/{resource}/{record_id}", status_code=status.HTTP_201_CREATED,
            responses=replay_of(RecordWrittenOut))
def write_record(
    resource: str, record_id: str, body: RecordIn, principal: CurrentPrincipal, engine: EngineDep,
    settings: SettingsDep, catalog: CatalogDep, response: Response,
) -> RecordWrittenOut:
    """Create (201) or update (200, with ``expected_version``) the caller's record; the same data again is a
    replay (200, ``replayed``). A stale ``expected_version`` is a 409 carrying ``current_version``."""
    not_public(principal)
    declaration = catalog.get(resource)
    store = record_store(settings.data_dir, principal.tenant_id)
    written = save_record(engine, principal, declaration, record_id, body.data, body.expected_version, store)
    release_bodies(engine, principal.tenant_id, store, written.released)
    if not written.created:
        response.status_code = status.HTTP_200_OK
    return RecordWrittenOut(ref=ref_of(resource, record_id), version=written.record.version,
                            replayed=written.replayed)


@router.get("/records/{resource}/{record_id}")
def read_record(
    resource: str, record_id: str, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep,
    catalog: CatalogDep,
) -> RecordOut:
    """The caller's record, whole (long fields read back from the artifact store)."""
    not_public(principal)
    declaration = catalog.get(resource)
    with tenant_session(engine, principal.tenant_id) as session:
        stored = get_record(session, principal, declaration, record_id,
                            record_store(settings.data_dir, principal.tenant_id))
    record = stored.record
    return RecordOut(
        ref=ref_of(resource, record_id), resource=resource, record_id=record_id, version=record.version,
        data=stored.data,
        long_fields=[LongFieldOut(path=b.path, sha256=b.sha256, size_bytes=b.size_bytes, characters=b.characters)
                     for b in stored.long_fields],
        created_at=record.created_at, updated_at=record.updated_at,
    )
