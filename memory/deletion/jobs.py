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

from memory.errors import Conflict, NotFound
from memory.models import AuditEntry, DeletionJob, DeletionLayer


class JobStatus(StrEnum):
    ACCEPTED = "accepted"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    BLOCKED_BY_RETENTION = "blocked_by_retention"
    FAILED_REQUIRES_ACTION = "failed_requires_action"
    COMPLETED = "completed"


_ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.ACCEPTED: frozenset({JobStatus.RUNNING, JobStatus.BLOCKED_BY_RETENTION, JobStatus.FAILED_REQUIRES_ACTION}),
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


class Layer(StrEnum):
    """Every place a deleted record can have a copy, in purge order.

    Source events go first: a single memory's deletion marks the events it was
    built from, and that needs the memory's evidence links before they are scrubbed.
    """

    SOURCE_EVENTS = "source_events"
    DERIVED_MEMORIES = "derived_memories"
    PRIMARY_MEMORIES = "primary_memories"
    SEARCH_PROJECTION = "search_projection"
    AUDIT_BODIES = "audit_bodies"
    VERIFICATION_PROBES = "verification_probes"


PURGE_LAYERS = tuple(layer for layer in Layer if layer is not Layer.VERIFICATION_PROBES)


MAX_READABLE_WORKFLOW_ID_BYTES = 255
"""Temporal refuses workflow ids over 1,000 bytes; a request id may be 1,024 (256 four-byte characters)."""


def workflow_id(tenant_id: str, deletion_request_id: str) -> str:
    """``deletion-{tenant}-{request}``; for a request id too long for that, ``deletion~{tenant}-{sha256}``.

    A job whose id Temporal refused stayed ``accepted`` forever. The long form has a prefix the short
    one never has, so no request id can name another request's workflow."""
    readable = f"deletion-{tenant_id}-{deletion_request_id}"
    if len(readable.encode()) <= MAX_READABLE_WORKFLOW_ID_BYTES:
        return readable
    return f"deletion~{tenant_id}-{hashlib.sha256(deletion_request_id.encode()).hexdigest()}"


def get_job(session: Session, tenant_id: str, job_id: uuid.UUID, *, lock: bool = False) -> DeletionJob:
    statement = select(DeletionJob).where(DeletionJob.tenant_id == tenant_id, DeletionJob.job_id == job_id)
    if lock:
        statement = statement.with_for_update()
    job = session.execute(statement).scalar_one_or_none()
    if job is None:
        raise NotFound(f"deletion job {job_id} does not exist")
    return job


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
        """Layers not yet confirmed clean: only an empty list may be reported as full deletion."""
        return [layer.layer for layer in self.layers if layer.status != "done"]


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
