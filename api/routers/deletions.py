"""Deletion: a barrier inside the request, then a DeletionWorkflow purging every layer.

Also retention holds, which keep a deletion's barrier but hold back its purge. Expiry, a different
operation with a different result, is a memory's (api/routers/memories.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from api.deps import CatalogDep, CurrentPrincipal, EngineDep, SettingsDep, get_temporal, parse_id, require_role
from api.errors import TemporalUnavailable
from api.outbox import start_job
from api.schemas.deletions import (
    DeletionAcceptedOut,
    DeletionJobOut,
    DeletionRequestIn,
    DeletionResumedOut,
    HoldIn,
    HoldOut,
    LayerOut,
    MemoryScopeIn,
    RecordScopeIn,
)
from api.settings import Settings
from memory import retention
from memory.auth import PrincipalContext
from memory.db import tenant_session
from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.jobs import JobStatus, NotResumable, check_resumable, readable_job, view_job
from memory.deletion.scope import ScopeType
from memory.enums import Role
from memory.events import request_digest
from memory.models import DeletionJob
from memory.owned_ids import default_request_id
from memory.resources.records import default_deletion_request_id, require_record_type, require_users_own_key
from workflows.deletion import DeletionWorkflow

router = APIRouter(tags=["deletion"])


def _scope_request(body: DeletionRequestIn) -> ScopeRequest:
    scope = body.scope
    if scope.type == "memory":
        return ScopeRequest(ScopeType.MEMORY, memory_id=scope.memory_id)
    if scope.type == "event":
        return ScopeRequest(ScopeType.EVENT, event_id=scope.event_id)
    if scope.type == "session":
        return ScopeRequest(ScopeType.SESSION, session_id=scope.session_id, user_id=scope.user_id)
    if scope.type == "record":
        return ScopeRequest(ScopeType.RECORD, resource=scope.resource, record_id=scope.record_id)
    return ScopeRequest(ScopeType.SUBJECT, user_id=scope.user_id)


async def _schedule(request: Request, settings: Settings, engine: EngineDep, job: DeletionJob) -> list[str]:
    """Start the job's workflow now if Temporal is there; if not, it stays in the outbox for the workers' drain."""
    error = await start_job(lambda: get_temporal(request), engine, settings, job)
    if error is None:
        return []
    return [
        f"the barrier is committed; the purge could not be started yet ({error.split(':', 1)[0]}) and is queued: "
        "it starts as soon as Temporal is reachable, without this request being repeated"
    ]


async def _accept(
    request: Request,
    response: Response,
    settings: Settings,
    principal: PrincipalContext,
    engine: EngineDep,
    body: DeletionRequestIn | Callable[[Session], DeletionRequestIn],
) -> DeletionAcceptedOut:
    """The barrier, then the purge scheduled; ``body`` may be made in the barrier's transaction (a default
    request id that depends on what is stored)."""

    def barrier() -> DeletionJob:
        with tenant_session(engine, principal.tenant_id) as session:
            request = body(session) if callable(body) else body
            digest = request_digest(request.model_dump(mode="json"))
            return request_deletion(session, principal, request.deletion_request_id, _scope_request(request),
                                    digest).job

    started = time.perf_counter()
    job = await run_in_threadpool(barrier)
    committed = time.perf_counter()
    warnings = await _schedule(request, settings, engine, job)
    # How long the barrier transaction took, and the workflow start after it (both inside this request).
    response.headers["Server-Timing"] = (
        f"barrier;dur={(committed - started) * 1000:.1f}, schedule;dur={(time.perf_counter() - committed) * 1000:.1f}"
    )
    return DeletionAcceptedOut(
        job_id=job.job_id,
        deletion_request_id=job.deletion_request_id,
        status=job.status,
        purge_scheduled=not warnings,
        warnings=warnings,
    )


@router.post("/deletion-requests", status_code=status.HTTP_202_ACCEPTED)
async def create_deletion_request(
    body: DeletionRequestIn,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
) -> DeletionAcceptedOut:
    """Delete a memory, an event, a session or a whole subject. The barrier is committed before this answers:
    from then on nothing returns the targets. A repeat with the same ``deletion_request_id`` returns the same job.
    A public_client key may not request one here (403), as it may not ``DELETE /records``; nor may an agent's key
    name a record (403 ``agent_key_on_records``)."""
    if body.scope.type == "record":
        require_users_own_key(principal)
    return await _accept(request, response, settings, principal, engine, body)


@router.delete("/memories/{memory_id}", status_code=status.HTTP_202_ACCEPTED)
async def delete_memory(
    memory_id: str,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    deletion_request_id: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> DeletionAcceptedOut:
    """Delete one memory (every version). Repeating the call returns the same job (the default request id is the
    caller's, and nobody else can compute it)."""
    parsed = parse_id(memory_id, "memory")

    def body(session: Session) -> DeletionRequestIn:
        return DeletionRequestIn(
            deletion_request_id=deletion_request_id or default_request_id(session, principal, "memory", str(parsed)),
            scope=MemoryScopeIn(type="memory", memory_id=parsed),
        )

    return await _accept(request, response, settings, principal, engine, body)


@router.delete("/records/{resource}/{record_id}", status_code=status.HTTP_202_ACCEPTED)
async def delete_record(
    resource: str,
    record_id: str,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    catalog: CatalogDep,
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

    return await _accept(request, response, settings, principal, engine, body)


@router.get("/memory-deletions/{job_id}")
def read_deletion(job_id: str, principal: CurrentPrincipal, engine: EngineDep) -> DeletionJobOut:
    """Per-layer status, remaining copies and completion evidence. Only ``completed`` means fully deleted."""
    parsed = parse_id(job_id, "deletion job")
    with tenant_session(engine, principal.tenant_id) as session:
        readable_job(session, principal, parsed)  # the 404 of a missing job, before anything else is read
        view = view_job(session, principal.tenant_id, parsed)
    job = view.job
    completed = job.status == JobStatus.COMPLETED.value
    return DeletionJobOut(
        job_id=job.job_id,
        deletion_request_id=job.deletion_request_id,
        status=job.status,
        scope={key: str(value) for key, value in job.scope.items()},
        epoch=job.epoch,
        barrier_at=job.barrier_at,
        updated_at=job.updated_at,
        completed_at=job.completed_at,
        fully_deleted=completed and not view.remaining_copies,
        remaining_copies=view.remaining_copies,
        last_error=job.last_error,
        layers=[LayerOut(**layer.__dict__) for layer in view.layers],
    )


async def _signal_job(request: Request, job: DeletionJob, signal: str) -> None:
    client = await get_temporal(request)
    handle: WorkflowHandle[DeletionWorkflow, object] = client.get_workflow_handle(job.workflow_id)
    await handle.signal(signal)


@router.post("/memory-deletions/{job_id}/resume")
async def resume_deletion(
    job_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> DeletionResumedOut:
    """After fixing what stopped a job (failed_requires_action), continue it from its checkpoints.

    A job in any other state is a 409 ``not_resumable`` naming its status: it is done, still running
    on its own, or waiting for a hold to be released."""
    require_role(principal, Role.OPERATOR, to="resuming a deletion job")
    parsed = parse_id(job_id, "deletion job")

    def load() -> DeletionJob:
        with tenant_session(engine, principal.tenant_id) as session:
            job = readable_job(session, principal, parsed)
            check_resumable(job)
            return job

    job = await run_in_threadpool(load)
    try:
        await _signal_job(request, job, "resume")
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise NotResumable(
                f"deletion job {job.job_id} is {job.status} but its workflow is no longer running ({exc.message})",
                details={"status": job.status},
            ) from exc
        raise TemporalUnavailable(f"Temporal did not take the resume signal: {exc.message}") from exc
    except RuntimeError as exc:  # the client could not connect
        raise TemporalUnavailable(f"Temporal is not reachable: {exc}") from exc
    return DeletionResumedOut(job_id=str(job.job_id), status=job.status, signal="resume")


def _hold_out(hold: object) -> HoldOut:
    return HoldOut.model_validate(hold, from_attributes=True)


@router.post("/retention-holds", status_code=status.HTTP_201_CREATED)
def create_hold(body: HoldIn, principal: CurrentPrincipal, engine: EngineDep) -> HoldOut:
    """A legal or retention hold (admin): deletions of this user's data keep their barrier but purge nothing
    (blocked_by_retention) until it is released."""
    with tenant_session(engine, principal.tenant_id) as session:
        return _hold_out(retention.create_hold(session, principal, body.user_id, body.reason))


@router.post("/retention-holds/{hold_id}/release")
async def release_hold(hold_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep) -> HoldOut:
    parsed = parse_id(hold_id, "retention hold")

    def release() -> tuple[HoldOut, list[DeletionJob]]:
        with tenant_session(engine, principal.tenant_id) as session:
            hold = retention.release_hold(session, principal, parsed)
            return _hold_out(hold), retention.blocked_jobs(session, principal.tenant_id, hold.user_id)

    hold, jobs = await run_in_threadpool(release)
    for job in jobs:
        await _signal_job(request, job, "holds_changed")
    return hold
