"""The resource catalog (what the caller's audience may see) and the source records behind it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import BaseModel

from api.access import ReadAccess
from api.deps import ArtifactsDep, CatalogDep, CurrentPrincipal, EngineDep
from api.schemas.common import replay_of
from api.schemas.resources import (
    LongFieldOut,
    ReadIn,
    RecordIn,
    RecordOut,
    RecordWrittenOut,
    SearchIn,
)
from memory.db import tenant_session
from memory.errors import InvalidInput
from memory.resources.bodies import record_store
from memory.resources.pages import encode
from memory.resources.reader import Reader
from memory.resources.records import get_record, ref_of, release_bodies, save_record
from memory.resources.results import Directory, ListPage, ReadPage, SearchResult

router = APIRouter(tags=["resources"])


async def get_reader(request: Request) -> Reader:
    reader: Reader = request.app.state.reader
    return reader


ReaderDep = Annotated[Reader, Depends(get_reader)]


@router.get("/resources")
def list_resources(access: ReadAccess, reader: ReaderDep) -> Directory:
    """``list()``: the resource types the caller may use now (its run's snapshot ∩ its agent's current policy ∩
    its audience's ceiling), their operations and the fields it may read; a type with no readable field is absent."""
    return reader.directory(access)


@router.put("/records/{resource}/{record_id}", status_code=status.HTTP_201_CREATED,
            responses=replay_of(RecordWrittenOut))
def write_record(
    resource: str, record_id: str, body: RecordIn, principal: CurrentPrincipal, engine: EngineDep,
    artifacts: ArtifactsDep, catalog: CatalogDep, response: Response,
) -> RecordWrittenOut:
    """Create (201) or update (200, with ``expected_version``) the caller's record; the same data again is a
    replay (200, ``replayed``). A stale ``expected_version`` is a 409 carrying ``current_version``."""
    declaration = catalog.get(resource)
    store = record_store(artifacts, principal.tenant_id)
    written = save_record(engine, principal, declaration, record_id, body.data, body.expected_version, store)
    release_bodies(engine, principal.tenant_id, store, written.released)
    if not written.created:
        response.status_code = status.HTTP_200_OK
    return RecordWrittenOut(ref=ref_of(resource, record_id), version=written.record.version,
                            replayed=written.replayed)


@router.get("/records/{resource}/{record_id}")
def read_record(
    resource: str, record_id: str, principal: CurrentPrincipal, engine: EngineDep, artifacts: ArtifactsDep,
    catalog: CatalogDep,
) -> RecordOut:
    """The caller's record, whole (long fields read back from the artifact store)."""
    declaration = catalog.get(resource)
    with tenant_session(engine, principal.tenant_id) as session:
        stored = get_record(session, principal, declaration, record_id,
                            record_store(artifacts, principal.tenant_id))
    record = stored.record
    return RecordOut(
        ref=ref_of(resource, record_id), resource=resource, record_id=record_id, version=record.version,
        data=stored.data,
        long_fields=[LongFieldOut(path=b.path, sha256=b.sha256, size_bytes=b.size_bytes, characters=b.characters)
                     for b in stored.long_fields],
        created_at=record.created_at, updated_at=record.updated_at,
    )




def sent(result: BaseModel) -> Response:
    """The result as the very bytes the reader measured against its 65,536-byte budget."""
    return Response(content=encode(result), media_type="application/json")


@router.get("/resources/{resource}", response_model=ListPage)
def list_records(
    resource: str, request: Request, access: ReadAccess, reader: ReaderDep,
    cursor: Annotated[str | None, Query(min_length=1, max_length=2_048,
                                        description="The previous page's next_cursor, unchanged")] = None,
) -> Response:
    """One page of the type's records, newest change first. Every other query parameter is one of the type's
    declared filters (``GET /resources`` names them; README "Resources" gives the syntax); any other is a 422."""
    filters: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name == "cursor":
            continue
        if name in filters:
            raise InvalidInput(f"filter {name!r} is given twice", code="duplicate_filter", details={"filter": name})
        filters[name] = value
    if len(request.query_params.getlist("cursor")) > 1:
        raise InvalidInput("cursor is given twice", code="duplicate_filter", details={"filter": "cursor"})
    return sent(reader.list(access, resource, filters, cursor))


@router.post("/resources/search", response_model=SearchResult)
def search_records(body: SearchIn, access: ReadAccess, reader: ReaderDep) -> Response:
    """Records of every type you may search (or of ``resource``), re-read from their source and ranked as one list."""
    return sent(reader.search(access, body.query, body.resource, body.top_k))


@router.post("/resources/read", response_model=ReadPage)
def read_resource(body: ReadIn, access: ReadAccess, reader: ReaderDep) -> Response:
    """The readable fields of one record: ``data`` whole when it fits 65,536 bytes, else ``fragments`` page by page
    until ``complete``."""
    return sent(reader.read(access, body.ref, body.cursor))
