"""What happened to a task, in time order: attempts, checkpoints, approvals, reminders, operations."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.tasks.models import Task, TaskApproval, TaskAttempt, TaskCheckpoint, TaskReminder
from memory.tasks.operations import operations
from memory.tasks.transitions import get_task


def list_tasks(
    session: Session,
    tenant_id: str,
    *,
    owner_user_id: str | None,
    status: str | None,
    limit: int,
    waiting_reason: str | None = None,
    task_type: str | None = None,
) -> list[Task]:
    query = select(Task).where(Task.tenant_id == tenant_id)
    for column, wanted in (
        (Task.owner_user_id, owner_user_id), (Task.status, status), (Task.waiting_reason, waiting_reason),
        (Task.task_type, task_type),
    ):
        if wanted is not None:
            query = query.where(column == wanted)
    return list(session.execute(query.order_by(Task.updated_at.desc(), Task.task_id).limit(limit)).scalars())


def timeline(session: Session, tenant_id: str, task_id: str) -> list[dict[str, Any]]:
    """Attempts, checkpoints, approvals, reminders and operations of a task, in time order. An agent's attempt
    (:mod:`memory.tasks.leases`) names who claimed it and until when it holds the step."""
    get_task(session, tenant_id, task_id)
    entries: list[dict[str, Any]] = []
    for a in session.execute(
        select(TaskAttempt).where(TaskAttempt.tenant_id == tenant_id, TaskAttempt.task_id == task_id)
    ).scalars():
        entries.append(
            {
                "at": a.started_at,
                "kind": "attempt",
                "step_id": a.step_id,
                "input_version": a.input_version,
                "attempt_number": a.attempt_number,
                "status": a.status,
                "input_digest": a.input_digest,
                "output_digest": a.output_digest,
                "error": a.error,
                "finished_at": a.finished_at,
                "actor": a.actor,
                "lease_expires_at": a.lease_expires_at,
                "id": str(a.attempt_id),
            }
        )
    for c in session.execute(
        select(TaskCheckpoint).where(TaskCheckpoint.tenant_id == tenant_id, TaskCheckpoint.task_id == task_id)
    ).scalars():
        entries.append(
            {
                "at": c.created_at,
                "kind": "checkpoint",
                "state_version": c.state_version,
                "status": c.task_status,
                "step_id": c.current_step_id,
                "reason": c.reason,
                "completed_step_ids": list(c.completed_step_ids),
                "pending_conditions": c.pending_conditions,
                "artifact_refs": c.artifact_refs,
                "id": str(c.checkpoint_id),
            }
        )
    approvals = list(
        session.execute(
            select(TaskApproval).where(TaskApproval.tenant_id == tenant_id, TaskApproval.task_id == task_id)
        ).scalars()
    )
    for ap in approvals:
        entries.append(
            {
                "at": ap.decided_at or ap.requested_at,  # a decision happened when it was made, not when asked
                "kind": "approval",
                "requested_at": ap.requested_at,
                "status": ap.status,
                "artifact_sha256": ap.artifact_sha256,
                "deadline_at": ap.deadline_at,
                "decided_by": ap.decided_by,
                "decided_at": ap.decided_at,
                "reason": ap.reason,
                "reminders_sent": ap.reminders_sent,
                "id": str(ap.approval_id),
            }
        )
    if approvals:
        for r in session.execute(
            select(TaskReminder).where(
                TaskReminder.tenant_id == tenant_id,
                TaskReminder.approval_id.in_([ap.approval_id for ap in approvals]),
            )
        ).scalars():
            entries.append(
                {"at": r.sent_at, "kind": "reminder", "reminder_number": r.reminder_number, "id": str(r.approval_id)}
            )
    for op in operations(session, tenant_id, task_id):
        entries.append(
            {
                "at": op.created_at,
                "kind": "operation",
                "operation_kind": op.kind,
                "status": op.status,
                "idempotency_key": op.idempotency_key,
                "destination": op.destination,
                "reconcile_attempts": op.reconcile_attempts,
                "publication_id": op.publication_id,
                "error": op.error,
                "resolved_by": op.resolved_by,
                "updated_at": op.updated_at,
                "id": str(op.operation_id),
            }
        )
    entries.sort(key=lambda e: (e["at"], e["kind"], e["id"]))
    return entries
