"""Deletion jobs at the Temporal edge: accepting a request (the barrier, then the workflow's start), starting a
job's workflow (at once, or later from the outbox's drain), and the signals that resume a job or tell it that
its retention holds changed. The router and the console both act through these."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from temporalio.client import WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.schemas.deletions import (
    DeletionAcceptedOut,
    DeletionJobOut,
    DeletionRequestIn,
    DeletionResumedOut,
    HoldIn,
    HoldOut,
    LayerOut,
    MemoryScopeIn,
)
from api.services.client import ClientSource, TemporalUnavailable
from api.settings import Settings
from memory.db import tenant_session
from memory.deletion import outbox
from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.jobs import JobStatus, NotResumable, check_resumable, readable_job, view_job
from memory.deletion.scope import ScopeType
from memory.enums import Role
from memory.identity.auth import PrincipalContext, require_role
from memory.identity.ids import default_request_id, parse_id
from memory.models import DeletionJob
from memory.store import retention
from memory.store.events import request_digest
from workflows.deletion import DeletionInput, DeletionWorkflow
from workflows.fairness import tenant_priority

START_TIMEOUT_SECONDS = 5.0
"""A start that Temporal does not answer in this time counts as failed; the row stays for the drain."""

RequestBody = DeletionRequestIn | Callable[[Session], DeletionRequestIn]
"""A request, or how to make it inside the barrier's transaction (a default id that depends on what is stored)."""


@dataclass(frozen=True)
class Accepted:
    """An accepted deletion, and how long its barrier and its workflow start took (a ``Server-Timing`` value)."""

    out: DeletionAcceptedOut
    server_timing: str


async def start_job(connect: ClientSource, engine: Engine, settings: Settings, job: DeletionJob) -> str | None:
    """Start the job's workflow under its deterministic id and clear its outbox row; the error, if it failed.

    A job already completed only has its row cleared. "Already started" (the run closed, the id is
    not reused) counts as started: that run is the one the job had.
    """
    tenant_id, job_id = job.tenant_id, job.job_id
    if job.status != JobStatus.COMPLETED.value:
        try:
            client = await asyncio.wait_for(connect(), START_TIMEOUT_SECONDS)
            await asyncio.wait_for(
                client.start_workflow(
                    DeletionWorkflow.run,
                    DeletionInput(
                        tenant_id=tenant_id,
                        job_id=str(job_id),
                        retry_wait_seconds=settings.deletion_retry_wait_seconds,
                        heartbeat_timeout_seconds=settings.deletion_heartbeat_timeout_seconds,
                    ),
                    id=job.workflow_id,
                    task_queue=settings.task_queue,
                    priority=tenant_priority(tenant_id),
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                ),
                START_TIMEOUT_SECONDS,
            )
        except WorkflowAlreadyStartedError:
            pass
        except Exception as exc:  # unreachable, refused or slow: the row stays queued
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

            def failed() -> None:
                with tenant_session(engine, tenant_id) as session:
                    outbox.attempt_failed(session, tenant_id, job_id, error)

            await asyncio.to_thread(failed)
            return error

    def done() -> None:
        with tenant_session(engine, tenant_id) as session:
            outbox.started(session, tenant_id, job_id)

    await asyncio.to_thread(done)
    return None


async def schedule(temporal: ClientSource, engine: Engine, settings: Settings, job: DeletionJob) -> list[str]:
    """Start the job's workflow now if Temporal is there; if not, it stays in the outbox for the workers' drain."""
    error = await start_job(temporal, engine, settings, job)
    if error is None:
        return []
    return [
        f"the barrier is committed; the purge could not be started yet ({error.split(':', 1)[0]}) and is queued: "
        "it starts as soon as Temporal is reachable, without this request being repeated"
    ]


def scope_request(body: DeletionRequestIn) -> ScopeRequest:
    """The domain's scope of a request's ``scope``."""
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


async def accept(
    temporal: ClientSource, engine: Engine, settings: Settings, principal: PrincipalContext, body: RequestBody
) -> Accepted:
    """The barrier (committed before this returns: from then on nothing returns the targets), then the purge
    scheduled."""

    def barrier() -> DeletionJob:
        with tenant_session(engine, principal.tenant_id) as session:
            request = body(session) if callable(body) else body
            digest = request_digest(request.model_dump(mode="json"))
            return request_deletion(session, principal, request.deletion_request_id, scope_request(request),
                                    digest, alone=True).job

    started = time.perf_counter()
    job = await run_in_threadpool(barrier)
    committed = time.perf_counter()
    warnings = await schedule(temporal, engine, settings, job)
    out = DeletionAcceptedOut(
        job_id=job.job_id, deletion_request_id=job.deletion_request_id, status=job.status,
        purge_scheduled=not warnings, warnings=warnings,
    )
    # How long the barrier transaction took, and the workflow start after it (both inside the request).
    scheduled = time.perf_counter()
    timing = f"barrier;dur={(committed - started) * 1000:.1f}, schedule;dur={(scheduled - committed) * 1000:.1f}"
    return Accepted(out, timing)


async def delete_memory(
    temporal: ClientSource, engine: Engine, settings: Settings, principal: PrincipalContext, memory_id: uuid.UUID,
    deletion_request_id: str | None = None,
) -> Accepted:
    """Delete one memory (every version); without a request id, the caller's own default one (a repeat returns
    the same job, and nobody else can compute it)."""

    def body(session: Session) -> DeletionRequestIn:
        return DeletionRequestIn(
            deletion_request_id=deletion_request_id or default_request_id(session, principal, "memory", str(memory_id)),
            scope=MemoryScopeIn(type="memory", memory_id=memory_id),
        )

    return await accept(temporal, engine, settings, principal, body)


async def _signal(temporal: ClientSource, job: DeletionJob, signal: str) -> None:
    client = await temporal()
    handle: WorkflowHandle[DeletionWorkflow, object] = client.get_workflow_handle(job.workflow_id)
    await handle.signal(signal)


async def resume(temporal: ClientSource, engine: Engine, principal: PrincipalContext, job_id: str
                 ) -> DeletionResumedOut:
    """Continue a job stopped in failed_requires_action from its checkpoints (operators); any other state is a
    409 ``not_resumable``, and so is a job whose workflow no longer runs. The role is checked before the id."""
    require_role(principal, Role.OPERATOR, to="resuming a deletion job")
    parsed = parse_id(job_id, "deletion job")

    def load() -> DeletionJob:
        with tenant_session(engine, principal.tenant_id) as session:
            job = readable_job(session, principal, parsed)
            check_resumable(job)
            return job

    job = await run_in_threadpool(load)
    try:
        await _signal(temporal, job, "resume")
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


async def holds_changed(temporal: ClientSource, jobs: list[DeletionJob]) -> None:
    """Tell each job blocked by a released hold to look at its holds again."""
    for job in jobs:
        await _signal(temporal, job, "holds_changed")


def read_job(engine: Engine, principal: PrincipalContext, job_id: uuid.UUID) -> DeletionJobOut:
    """Per-layer status, remaining copies and completion evidence; the 404 of a missing job for anyone who may
    not read it. Only ``completed`` with no remaining copy is ``fully_deleted``."""
    with tenant_session(engine, principal.tenant_id) as session:
        readable_job(session, principal, job_id)  # the 404 of a missing job, before anything else is read
        view = view_job(session, principal.tenant_id, job_id)
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


def create_hold(engine: Engine, principal: PrincipalContext, body: HoldIn) -> HoldOut:
    """A legal or retention hold (admin): deletions of the user's data keep their barrier but purge nothing."""
    with tenant_session(engine, principal.tenant_id) as session:
        return HoldOut.model_validate(retention.create_hold(session, principal, body.user_id, body.reason),
                                      from_attributes=True)


async def release_hold(temporal: ClientSource, engine: Engine, principal: PrincipalContext, hold_id: uuid.UUID
                       ) -> HoldOut:
    """Lift a hold (admin), then tell the jobs it blocked to purge."""

    def release() -> tuple[HoldOut, list[DeletionJob]]:
        with tenant_session(engine, principal.tenant_id) as session:
            hold = retention.release_hold(session, principal, hold_id)
            out = HoldOut.model_validate(hold, from_attributes=True)
            return out, retention.blocked_jobs(session, principal.tenant_id, hold.user_id)

    hold, jobs = await run_in_threadpool(release)
    await holds_changed(temporal, jobs)
    return hold
