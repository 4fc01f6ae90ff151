"""The outbox of deletion workflow starts: a job accepted while Temporal is down still runs.

The barrier transaction writes the job *and* its outbox row, so "this job's workflow must be
started" is committed with the barrier or not at all. After the commit the API tries to start the
workflow at once and deletes the row when Temporal has it. If Temporal is unreachable the row
stays, and every ``mnemo worker`` drains the outbox when it starts and then periodically
(``api.outbox``): the worker is the process that must be connected to Temporal for any job to
progress, so it is the one place where a start is sure to be retried when it can succeed, whether
or not the API that accepted the job is still running.

Starting twice is harmless: the workflow id is the job's deterministic ``workflow_id``, started
with "use the existing run" (a second start joins the running one) and "reject duplicates" (a start
after the run closed is refused, never a second run). So the API, several workers, and a repeated
request may all race to start the same job. This module holds the database half; the Temporal half
is :func:`api.services.deletions.start_job` (the start) and ``api.outbox`` (the drain).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from memory.db import set_local
from memory.models import DeletionOutbox

DRAIN_SETTING = "mnemo.outbox_drain"
"""Set for one transaction, it lets that transaction read every tenant's outbox rows (migration 0012)."""


@dataclass(frozen=True)
class Pending:
    tenant_id: str
    job_id: uuid.UUID


def enqueue(session: Session, tenant_id: str, job_id: uuid.UUID) -> None:
    """Record, in the barrier's transaction, that the job's workflow must be started."""
    session.add(DeletionOutbox(tenant_id=tenant_id, job_id=job_id))


def started(session: Session, tenant_id: str, job_id: uuid.UUID) -> None:
    """Temporal has the workflow (or it already ran): nothing left to start."""
    session.execute(
        delete(DeletionOutbox).where(DeletionOutbox.tenant_id == tenant_id, DeletionOutbox.job_id == job_id)
    )


def attempt_failed(session: Session, tenant_id: str, job_id: uuid.UUID, error: str) -> None:
    """Keep the row, and say when and why the last start failed (the drain tries the least recently tried first)."""
    session.execute(
        update(DeletionOutbox)
        .where(DeletionOutbox.tenant_id == tenant_id, DeletionOutbox.job_id == job_id)
        .values(attempts=DeletionOutbox.attempts + 1, last_attempt_at=func.now(), last_error=error[:1_000])
    )


def pending(session: Session, limit: int) -> list[Pending]:
    """Every tenant's queued starts, never tried first, then the least recently tried.

    ``session`` is a transaction with no tenant context (:func:`memory.db.global_session`); reading
    across tenants is allowed for this transaction only, and only for this table's ids.
    """
    set_local(session, DRAIN_SETTING, "on")
    rows = session.execute(
        select(DeletionOutbox.tenant_id, DeletionOutbox.job_id)
        .order_by(DeletionOutbox.last_attempt_at.asc().nulls_first(), DeletionOutbox.enqueued_at)
        .limit(limit)
    ).all()
    return [Pending(row.tenant_id, row.job_id) for row in rows]


__all__ = ["DRAIN_SETTING", "Pending", "attempt_failed", "enqueue", "pending", "started"]
