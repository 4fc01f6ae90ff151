"""Deletion: a barrier inside the request, then a DeletionWorkflow purging every layer.

Also retention holds, which keep a deletion's barrier but hold back its purge. Expiry, a different
operation with a different result, is a memory's (api/routers/memories.py). The work is
:mod:`api.services.deletions`'s; this module only translates HTTP.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from sqlalchemy.orm import Session

from api.deps import CatalogDep, CurrentPrincipal, EngineDep, SettingsDep, TemporalSource
from api.schemas.deletions import (
    DeletionAcceptedOut,
    DeletionJobOut,
    DeletionRequestIn,
    DeletionResumedOut,
    HoldIn,
    HoldOut,
    RecordScopeIn,
)
from api.services import deletions
from api.services.deletions import Accepted
from memory.identity.ids import parse_id
from memory.resources.records import default_deletion_request_id, require_record_type, require_users_own_key

router = APIRouter(tags=["deletion"])


def _answer(response: Response, accepted: Accepted) -> DeletionAcceptedOut:
    response.headers["Server-Timing"] = accepted.server_timing
    return accepted.out


@router.post("/deletion-requests", status_code=status.HTTP_202_ACCEPTED)
async def create_deletion_request(
    body: DeletionRequestIn,
    response: Response,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    temporal: TemporalSource,
) -> DeletionAcceptedOut:
    """Delete a memory, an event, a session or a whole subject. The barrier is committed before this answers:
    from then on nothing returns the targets. A repeat with the same ``deletion_request_id`` returns the same job.
    A public_client key may not request one here (403), as it may not ``DELETE /records``; nor may an agent's key
    name a record (403 ``agent_key_on_records``)."""
    if body.scope.type == "record":
        require_users_own_key(principal)
    return _answer(response, await deletions.accept(temporal, engine, settings, principal, body))


@router.delete("/memories/{memory_id}", status_code=status.HTTP_202_ACCEPTED)
async def delete_memory(
    memory_id: str,
    response: Response,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    temporal: TemporalSource,
    deletion_request_id: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> DeletionAcceptedOut:
    """Delete one memory (every version). Repeating the call returns the same job (the default request id is the
    caller's, and nobody else can compute it)."""
    parsed = parse_id(memory_id, "memory")
    accepted = await deletions.delete_memory(temporal, engine, settings, principal, parsed, deletion_request_id)
    return _answer(response, accepted)


@router.delete("/records/{resource}/{record_id}", status_code=status.HTTP_202_ACCEPTED)
async def delete_record(
    resource: str,
    record_id: str,
    response: Response,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    catalog: CatalogDep,
    temporal: TemporalSource,
    deletion_request_id: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> DeletionAcceptedOut:
    """Delete one of the caller's records: its rows, search projection and long bodies. From the 202 on it is
    as missing as one never written. Repeating the call returns the same job; a record written again after
    its deletion is a new one, and deleting it is a new job."""
    require_users_own_key(principal)
    declaration = catalog.get(resource)
    require_record_type(declaration)

    def body(session: Session) -> DeletionRequestIn:
        return DeletionRequestIn(
            deletion_request_id=deletion_request_id
            or default_deletion_request_id(session, principal, declaration.type, record_id),
            scope=RecordScopeIn(type="record", resource=declaration.type, record_id=record_id),
        )

    return _answer(response, await deletions.accept(temporal, engine, settings, principal, body))


@router.get("/memory-deletions/{job_id}")
def read_deletion(job_id: str, principal: CurrentPrincipal, engine: EngineDep) -> DeletionJobOut:
    """Per-layer status, remaining copies and completion evidence. Only ``completed`` means fully deleted."""
    return deletions.read_job(engine, principal, parse_id(job_id, "deletion job"))


@router.post("/memory-deletions/{job_id}/resume")
async def resume_deletion(
    job_id: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource
) -> DeletionResumedOut:
    """After fixing what stopped a job (failed_requires_action), continue it from its checkpoints.

    A job in any other state is a 409 ``not_resumable`` naming its status: it is done, still running
    on its own, or waiting for a hold to be released."""
    return await deletions.resume(temporal, engine, principal, job_id)


@router.post("/retention-holds", status_code=status.HTTP_201_CREATED)
def create_hold(body: HoldIn, principal: CurrentPrincipal, engine: EngineDep) -> HoldOut:
    """A legal or retention hold (admin): deletions of this user's data keep their barrier but purge nothing
    (blocked_by_retention) until it is released."""
    return deletions.create_hold(engine, principal, body)


@router.post("/retention-holds/{hold_id}/release")
async def release_hold(
    hold_id: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource
) -> HoldOut:
    return await deletions.release_hold(temporal, engine, principal, parse_id(hold_id, "retention hold"))
