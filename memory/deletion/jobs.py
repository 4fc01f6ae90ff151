"""Deletion jobs: the status machine, the layer list and the read model the API returns."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memory.deletion.scope import PERSONAL_SPACES
from memory.enums import Role
from memory.errors import Conflict, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry, DeletionJob, DeletionLayer, Memory


class JobStatus(StrEnum):
    ACCEPTED = "accepted"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    BLOCKED_BY_RETENTION = "blocked_by_retention"
    FAILED_REQUIRES_ACTION = "failed_requires_action"
    COMPLETED = "completed"


_ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.ACCEPTED: frozenset(
        {JobStatus.RUNNING, JobStatus.BLOCKED_BY_RETENTION, JobStatus.FAILED_REQUIRES_ACTION}
    ),
    JobStatus.RUNNING: frozenset(
        {JobStatus.RETRY_WAIT, JobStatus.BLOCKED_BY_RETENTION, JobStatus.FAILED_REQUIRES_ACTION, JobStatus.COMPLETED}
    ),
    JobStatus.RETRY_WAIT: frozenset({JobStatus.RUNNING, JobStatus.FAILED_REQUIRES_ACTION}),
    JobStatus.BLOCKED_BY_RETENTION: frozenset({JobStatus.RUNNING}),
    JobStatus.FAILED_REQUIRES_ACTION: frozenset({JobStatus.RUNNING}),
    JobStatus.COMPLETED: frozenset(),
}


class InvalidTransition(Conflict):
    code = "invalid_transition"


class NotResumable(Conflict):
    code = "not_resumable"


_NOT_RESUMABLE = {
    JobStatus.COMPLETED: "there is nothing left to resume",
    JobStatus.BLOCKED_BY_RETENTION: (
        "it waits for a retention or legal hold on its subject; releasing the hold resumes it"
    ),
    JobStatus.ACCEPTED: "it has not stopped (its purge is starting, or queued until Temporal is reachable)",
    JobStatus.RUNNING: "it has not stopped",
    JobStatus.RETRY_WAIT: "it has not stopped (it retries on its own after a transient failure)",
}


def check_resumable(job: DeletionJob) -> None:
    """Only a job in failed_requires_action waits for an operator; resuming any other is a typed 409."""
    status = JobStatus(job.status)
    if status is not JobStatus.FAILED_REQUIRES_ACTION:
        raise NotResumable(
            f"deletion job {job.job_id} is {status.value}: {_NOT_RESUMABLE[status]}; "
            "resume continues only a job in failed_requires_action",
            details={"status": status.value},
        )


class Layer(StrEnum):
    """Every place a deleted record can have a copy, in purge order.

    Source events go first: a single memory's deletion marks the events it was
    built from, and that needs the memory's evidence links before they are scrubbed.
    """

    SOURCE_EVENTS = "source_events"
    KNOWLEDGE = "knowledge"
    """Knowledge candidates and published items resting on a deleted source (deletion.knowledge_layer). Early: a
    subject's records, which it names, are purged by the next layer."""
    SOURCE_RECORDS = "source_records"
    """Source records (todos, transcripts, ...): rows, search projection and long bodies (deletion.record_layer)."""
    DERIVED_MEMORIES = "derived_memories"
    DERIVED_SUMMARIES = "derived_summaries"
    """Session summaries (scrubbed, then rebuilt from the remaining events) and stable-choice rows."""
    PRIMARY_MEMORIES = "primary_memories"
    SEARCH_PROJECTION = "search_projection"
    AUDIT_BODIES = "audit_bodies"
    VERIFICATION_PROBES = "verification_probes"


PURGE_LAYERS = tuple(layer for layer in Layer if layer is not Layer.VERIFICATION_PROBES)


def workflow_id(tenant_id: str, requested_by: str, deletion_request_id: str) -> str:
    """``deletion-{tenant}-{digest}``: the digest (32 hex) of the tenant, the requester and their request id.

    Request ids are each requester's own, and Temporal's ids are one namespace for every tenant: a readable
    ``deletion-{tenant}-{request}`` let ``t`` + ``a-b`` and ``t-a`` + ``b`` name one workflow, and two users' equal
    ids would too. A fixed-length digest after the tenant id is unambiguous and always short enough."""
    digest = hashlib.sha256(f"{tenant_id}\x00{requested_by}\x00{deletion_request_id}".encode()).hexdigest()[:32]
    return f"deletion-{tenant_id}-{digest}"


def _missing(job_id: uuid.UUID) -> NotFound:
    """The one answer for a job that does not exist and for one the caller may not see (canonical id in both)."""
    return NotFound(f"deletion job {job_id} does not exist")


def get_job(session: Session, tenant_id: str, job_id: uuid.UUID, *, lock: bool = False) -> DeletionJob:
    statement = select(DeletionJob).where(DeletionJob.tenant_id == tenant_id, DeletionJob.job_id == job_id)
    if lock:
        statement = statement.with_for_update()
    job = session.execute(statement).scalar_one_or_none()
    if job is None:
        raise _missing(job_id)
    return job


def subject_user(session: Session, job: DeletionJob) -> str | None:
    """The user whose data the job deletes, or ``None`` when it deletes shared or agent data.

    ``subject_user_id`` is the owner whose deletion epoch the job bumped. For a TENANT memory that
    owner is the tenant id, for a SYSTEM memory ``"system"``, for an AGENT memory the agent id: none
    of them is a user, though a user may have the same id (it read such jobs as their subject).
    Events, sessions and subjects always belong to a user.
    """
    if job.scope_type != "memory":
        return job.subject_user_id
    space = session.execute(
        select(Memory.space)
        .where(Memory.tenant_id == job.tenant_id, Memory.memory_id == uuid.UUID(job.scope["memory_id"]))
        .limit(1)
    ).scalar_one_or_none()
    return job.subject_user_id if space in PERSONAL_SPACES else None


def readable_job(session: Session, principal: PrincipalContext, job_id: uuid.UUID) -> DeletionJob:
    """The job, for who requested it, the user whose data it deletes, an admin or an operator; else the 404 of a
    missing job."""
    job = get_job(session, principal.tenant_id, job_id)
    if (
        principal.has(Role.ADMIN)
        or principal.has(Role.OPERATOR)
        or principal.user_id == job.requested_by
        or principal.user_id == subject_user(session, job)
    ):
        return job
    raise _missing(job_id)


def transition(session: Session, job: DeletionJob, to: JobStatus, *, error: str | None = None) -> None:
    """Move a job along the status machine (a repeat of the current status is a no-op); audit it."""
    current = JobStatus(job.status)
    if to is current:
        return
    if to not in _ALLOWED[current]:
        raise InvalidTransition(f"a deletion job cannot go from {current.value} to {to.value}")
    job.status = to.value
    job.updated_at = func.now()
    job.last_error = error
    if to is JobStatus.COMPLETED:
        job.completed_at = func.now()
    session.add(
        AuditEntry(
            tenant_id=job.tenant_id,
            actor="deletion-workflow",
            action=f"DELETION_{to.value.upper()}",
            job_id=job.job_id,
            detail={"error": error} if error else {},
        )
    )
    session.flush()


def record_layer(
    session: Session,
    tenant_id: str,
    job_id: uuid.UUID,
    layer: Layer,
    *,
    status: str,
    removed: int = 0,
    remaining: int | None = None,
    evidence: dict[str, Any] | None = None,
) -> None:
    """Checkpoint a layer: add ``removed`` to its count and merge ``evidence`` into what it has."""
    row = session.execute(
        select(DeletionLayer)
        .where(DeletionLayer.tenant_id == tenant_id, DeletionLayer.job_id == job_id, DeletionLayer.layer == layer.value)
        .with_for_update()
    ).scalar_one()
    row.status = status
    row.removed = row.removed + removed
    row.remaining = remaining
    if evidence:
        merged = dict(row.evidence)
        for key, value in evidence.items():
            if isinstance(value, int) and isinstance(merged.get(key), int):
                merged[key] = merged[key] + value
            else:
                merged[key] = value
        row.evidence = merged
    row.updated_at = func.now()
    session.flush()


def reset_failed_layers(session: Session, tenant_id: str, job_id: uuid.UUID) -> None:
    session.execute(
        update(DeletionLayer)
        .where(DeletionLayer.tenant_id == tenant_id, DeletionLayer.job_id == job_id, DeletionLayer.status == "failed")
        .values(status="pending")
    )


@dataclass(frozen=True)
class LayerView:
    layer: str
    status: str
    removed: int
    remaining: int | None
    evidence: dict[str, Any]
    updated_at: datetime


@dataclass(frozen=True)
class JobView:
    job: DeletionJob
    layers: list[LayerView]

    @property
    def remaining_copies(self) -> list[str]:
        """Layers not yet confirmed clean, then each copy the residue scan found (``table.column#row id``, or a
        store's file, or a workflow's history): only an empty list may be reported as full deletion."""
        copies = [str(c) for layer in self.layers for c in layer.evidence.get("remaining_copies", [])]
        return [layer.layer for layer in self.layers if layer.status != "done"] + copies


def view_job(session: Session, tenant_id: str, job_id: uuid.UUID) -> JobView:
    job = get_job(session, tenant_id, job_id)
    rows = session.execute(
        select(DeletionLayer)
        .where(DeletionLayer.tenant_id == tenant_id, DeletionLayer.job_id == job_id)
        .order_by(DeletionLayer.position)
    ).scalars()
    return JobView(
        job,
        [LayerView(r.layer, r.status, r.removed, r.remaining, dict(r.evidence), r.updated_at) for r in rows],
    )
