"""Read-model writes and reads. Every task write names the ``state_version`` it expects.

A write that finds another version is refused (:class:`VersionConflict`), except
the replay of the very same transition (same ``transition_id``), which returns
the row as it left it: an activity retried after its commit changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import NotFound, VersionConflict
from memory.tasks.models import (
    Task,
    TaskApproval,
    TaskArtifact,
    TaskAttempt,
    TaskCheckpoint,
    TaskOperation,
    TaskReminder,
    TaskStep,
)
from memory.tasks.states import TaskStatus, TransitionFacts, check_transition

KEEP = "__keep__"
"""Sentinel for :class:`Transition` fields that leave the column as it is."""


@dataclass(frozen=True)
class NewTask:
    tenant_id: str
    task_id: str
    owner_user_id: str
    task_type: str
    goal: dict[str, Any]
    request_intent_id: str
    create_key: str
    destination: str
    workflow_id: str
    run_id: str | None
    workflow_version: str
    transition_id: str


@dataclass(frozen=True)
class Transition:
    expected_version: int
    transition_id: str
    target: TaskStatus
    current_step_id: str | None = KEEP
    complete_step: str | None = None
    waiting_reason: str | None = None
    draft_sha256: str | None = KEEP
    error: dict[str, Any] | None = None
    facts: TransitionFacts = TransitionFacts()
    checkpoint_reason: str | None = None
    pending_conditions: list[dict[str, Any]] = field(default_factory=list)


def get_task(session: Session, tenant_id: str, task_id: str, *, lock: bool = False) -> Task:
    """The task, or the same :class:`NotFound` whether it is missing or another tenant's."""
    query = select(Task).where(Task.tenant_id == tenant_id, Task.task_id == task_id)
    task = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if task is None:
        raise NotFound(f"task {task_id} does not exist")
    return task


def task_owner(session: Session, tenant_id: str, task_id: str) -> str | None:
    """The owner of the task as the read model knows it, or None when it has no row (missing, another
    tenant's, or started but not recorded yet). One indexed read, so access can be decided before Temporal."""
    owner: str | None = session.execute(
        select(Task.owner_user_id).where(Task.tenant_id == tenant_id, Task.task_id == task_id)
    ).scalar_one_or_none()
    return owner


def insert_task(session: Session, new: NewTask) -> Task:
    """Insert the task as READY at state_version 1, or return the row a first try already wrote."""
    check_transition(TaskStatus.CREATED, TaskStatus.READY)
    inserted = session.execute(
        insert(Task)
        .values(
            tenant_id=new.tenant_id,
            task_id=new.task_id,
            owner_user_id=new.owner_user_id,
            task_type=new.task_type,
            goal=new.goal,
            request_intent_id=new.request_intent_id,
            create_key=new.create_key,
            destination=new.destination,
            status=TaskStatus.READY.value,
            workflow_id=new.workflow_id,
            run_id=new.run_id,
            workflow_version=new.workflow_version,
            state_version=1,
            last_transition_id=new.transition_id,
        )
        .on_conflict_do_nothing()
        .returning(Task.task_id)
    ).scalar_one_or_none()
    task = get_task(session, new.tenant_id, new.task_id)
    if inserted is not None:
        _checkpoint(session, task, "created", [])
    return task


def _artifact_refs(session: Session, task: Task) -> list[dict[str, str]]:
    rows = session.execute(
        select(TaskArtifact.sha256, TaskArtifact.name)
        .where(TaskArtifact.tenant_id == task.tenant_id, TaskArtifact.task_id == task.task_id)
        .order_by(TaskArtifact.created_at, TaskArtifact.sha256)
    ).all()
    return [{"sha256": sha, "name": name} for sha, name in rows]


def _checkpoint(session: Session, task: Task, reason: str, pending: list[dict[str, Any]]) -> None:
    session.execute(
        insert(TaskCheckpoint)
        .values(
            tenant_id=task.tenant_id,
            checkpoint_id=uuid.uuid4(),
            task_id=task.task_id,
            state_version=task.state_version,
            task_status=task.status,
            current_step_id=task.current_step_id,
            completed_step_ids=list(task.completed_step_ids),
            artifact_refs=_artifact_refs(session, task),
            pending_conditions=pending,
            reason=reason,
        )
        .on_conflict_do_nothing()
    )


def apply_transition(session: Session, tenant_id: str, task_id: str, change: Transition) -> Task:
    """Move the task through the status machine at ``expected_version`` (see the module docstring)."""
    task = get_task(session, tenant_id, task_id, lock=True)
    if task.state_version == change.expected_version + 1 and task.last_transition_id == change.transition_id:
        return task
    if task.state_version != change.expected_version:
        raise VersionConflict(
            f"task {task_id} is at state_version {task.state_version}, not {change.expected_version}",
            details={"state_version": task.state_version},
        )
    check_transition(TaskStatus(task.status), change.target, change.facts)
    task.status = change.target.value
    if change.current_step_id != KEEP:
        task.current_step_id = change.current_step_id
    if change.complete_step and change.complete_step not in task.completed_step_ids:
        task.completed_step_ids = [*task.completed_step_ids, change.complete_step]
    task.waiting_reason = change.waiting_reason
    if change.draft_sha256 != KEEP:
        task.draft_sha256 = change.draft_sha256
    if change.error is not None:
        task.error = change.error
    task.state_version += 1
    task.last_transition_id = change.transition_id
    task.updated_at = func.now()
    session.flush()
    session.refresh(task)
    if change.checkpoint_reason:
        _checkpoint(session, task, change.checkpoint_reason, change.pending_conditions)
    return task


# --- steps and attempts -------------------------------------------------------------------------


def succeeded_step(session: Session, tenant_id: str, idempotency_key: str) -> TaskStep | None:
    return session.execute(
        select(TaskStep).where(
            TaskStep.tenant_id == tenant_id, TaskStep.idempotency_key == idempotency_key, TaskStep.status == "SUCCEEDED"
        )
    ).scalar_one_or_none()


def start_attempt(
    session: Session,
    *,
    tenant_id: str,
    task_id: str,
    step_id: str,
    input_version: str,
    idempotency_key: str,
    temporal_attempt: int,
    input_digest: str,
    worker: str | None,
) -> TaskAttempt:
    """A new attempt row. Attempts of the same step still RUNNING belonged to a dead worker: ABANDONED."""
    session.execute(
        insert(TaskStep)
        .values(
            tenant_id=tenant_id,
            task_id=task_id,
            step_id=step_id,
            input_version=input_version,
            idempotency_key=idempotency_key,
            status="RUNNING",
            attempts=1,
        )
        .on_conflict_do_update(
            index_elements=["tenant_id", "task_id", "step_id", "input_version"],
            set_={"attempts": TaskStep.attempts + 1, "updated_at": func.now()},
        )
    )
    session.execute(
        update(TaskAttempt)
        .where(
            TaskAttempt.tenant_id == tenant_id,
            TaskAttempt.task_id == task_id,
            TaskAttempt.step_id == step_id,
            TaskAttempt.input_version == input_version,
            TaskAttempt.status == "RUNNING",
        )
        .values(status="ABANDONED", finished_at=func.now(), error={"code": "abandoned", "message": "superseded by a new attempt"})
    )
    number = session.execute(
        select(func.coalesce(func.max(TaskAttempt.attempt_number), 0)).where(
            TaskAttempt.tenant_id == tenant_id,
            TaskAttempt.task_id == task_id,
            TaskAttempt.step_id == step_id,
            TaskAttempt.input_version == input_version,
        )
    ).scalar_one()
    attempt = TaskAttempt(
        tenant_id=tenant_id,
        attempt_id=uuid.uuid4(),
        task_id=task_id,
        step_id=step_id,
        input_version=input_version,
        attempt_number=int(number) + 1,
        temporal_attempt=temporal_attempt,
        status="RUNNING",
        input_digest=input_digest,
        worker=worker,
    )
    session.add(attempt)
    session.flush()
    return attempt


def finish_attempt(
    session: Session,
    tenant_id: str,
    attempt_id: uuid.UUID,
    *,
    status: str,
    output_digest: str | None = None,
    error: dict[str, Any] | None = None,
) -> None:
    session.execute(
        update(TaskAttempt)
        .where(TaskAttempt.tenant_id == tenant_id, TaskAttempt.attempt_id == attempt_id)
        .values(status=status, output_digest=output_digest, error=error, finished_at=func.now())
    )


def record_step_success(
    session: Session, tenant_id: str, task_id: str, step_id: str, input_version: str, output: dict[str, Any], digest: str
) -> None:
    session.execute(
        update(TaskStep)
        .where(
            TaskStep.tenant_id == tenant_id,
            TaskStep.task_id == task_id,
            TaskStep.step_id == step_id,
            TaskStep.input_version == input_version,
        )
        .values(status="SUCCEEDED", output=output, output_digest=digest, updated_at=func.now())
    )


STEP_ATTEMPT_LIMIT = 5
"""A step that failed this many times on its own (not for an outage) fails its task."""

STEP_ATTEMPT_BACKSTOP = 50
"""Temporal attempts, outages included, after which an error outside the step's recorded attempts is final."""

OUTAGE = "database_unavailable"
"""The error code of an attempt that met an unreachable database: it does not count towards the limit."""


def record_step_failure(session: Session, tenant_id: str, task_id: str, step_id: str, input_version: str) -> int:
    """Mark the step FAILED; return how many of its attempts failed on their own (outages not counted)."""
    session.execute(
        update(TaskStep)
        .where(
            TaskStep.tenant_id == tenant_id,
            TaskStep.task_id == task_id,
            TaskStep.step_id == step_id,
            TaskStep.input_version == input_version,
            TaskStep.status != "SUCCEEDED",
        )
        .values(status="FAILED", updated_at=func.now())
    )
    return int(
        session.execute(
            select(func.count()).where(
                TaskAttempt.tenant_id == tenant_id,
                TaskAttempt.task_id == task_id,
                TaskAttempt.step_id == step_id,
                TaskAttempt.input_version == input_version,
                TaskAttempt.status == "FAILED",
                TaskAttempt.error["code"].astext != OUTAGE,
            )
        ).scalar_one()
    )


@dataclass(frozen=True)
class ArtifactMeta:
    sha256: str
    name: str
    kind: str
    media_type: str
    size_bytes: int


def add_artifacts(session: Session, tenant_id: str, task_id: str, step_id: str, artifacts: list[ArtifactMeta]) -> None:
    """Content-addressed: the same bytes for the same task are one row, however often they are stored."""
    for meta in artifacts:
        session.execute(
            insert(TaskArtifact)
            .values(
                tenant_id=tenant_id,
                task_id=task_id,
                sha256=meta.sha256,
                name=meta.name,
                kind=meta.kind,
                media_type=meta.media_type,
                size_bytes=meta.size_bytes,
                step_id=step_id,
            )
            .on_conflict_do_nothing()
        )


def get_artifact(session: Session, tenant_id: str, task_id: str, sha256: str) -> TaskArtifact:
    row = session.execute(
        select(TaskArtifact).where(
            TaskArtifact.tenant_id == tenant_id, TaskArtifact.task_id == task_id, TaskArtifact.sha256 == sha256
        )
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(f"artifact {sha256} does not exist in task {task_id}")
    return row


# --- approvals ----------------------------------------------------------------------------------


def request_approval(
    session: Session,
    *,
    tenant_id: str,
    task_id: str,
    artifact_sha256: str,
    approval_type: str,
    idempotency_key: str,
    approval_id: uuid.UUID,
    state_version: int,
    deadline_at: datetime,
) -> TaskApproval:
    """One request per (task, artifact hash, type); pending requests for older drafts are INVALIDATED."""
    session.execute(
        update(TaskApproval)
        .where(
            TaskApproval.tenant_id == tenant_id,
            TaskApproval.task_id == task_id,
            TaskApproval.artifact_sha256 != artifact_sha256,
            TaskApproval.status.in_(("PENDING", "APPROVED")),
        )
        .values(status="INVALIDATED")
    )
    session.execute(
        insert(TaskApproval)
        .values(
            tenant_id=tenant_id,
            approval_id=approval_id,
            task_id=task_id,
            approval_type=approval_type,
            artifact_sha256=artifact_sha256,
            idempotency_key=idempotency_key,
            status="PENDING",
            requested_state_version=state_version,
            deadline_at=deadline_at,
        )
        .on_conflict_do_nothing()
    )
    return approval_by_key(session, tenant_id, idempotency_key)


def approval_by_key(session: Session, tenant_id: str, idempotency_key: str) -> TaskApproval:
    return session.execute(
        select(TaskApproval).where(TaskApproval.tenant_id == tenant_id, TaskApproval.idempotency_key == idempotency_key)
    ).scalar_one()


def get_approval(session: Session, tenant_id: str, approval_id: uuid.UUID, *, lock: bool = False) -> TaskApproval:
    query = select(TaskApproval).where(TaskApproval.tenant_id == tenant_id, TaskApproval.approval_id == approval_id)
    row = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if row is None:
        raise NotFound(f"approval {approval_id} does not exist")
    return row


def record_reminder(session: Session, tenant_id: str, approval_id: uuid.UUID, number: int) -> bool:
    """Idempotent by (approval, reminder number): returns False when this reminder was already sent."""
    inserted = session.execute(
        insert(TaskReminder)
        .values(tenant_id=tenant_id, approval_id=approval_id, reminder_number=number)
        .on_conflict_do_nothing()
        .returning(TaskReminder.reminder_number)
    ).scalar_one_or_none()
    if inserted is not None:
        session.execute(
            update(TaskApproval)
            .where(TaskApproval.tenant_id == tenant_id, TaskApproval.approval_id == approval_id)
            .values(reminders_sent=number)
        )
    return inserted is not None


# --- operations ---------------------------------------------------------------------------------


def get_operation(session: Session, tenant_id: str, operation_id: uuid.UUID, *, lock: bool = False) -> TaskOperation:
    query = select(TaskOperation).where(TaskOperation.tenant_id == tenant_id, TaskOperation.operation_id == operation_id)
    row = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if row is None:
        raise NotFound(f"operation {operation_id} does not exist")
    return row


def begin_operation(
    session: Session,
    *,
    tenant_id: str,
    task_id: str,
    operation_id: uuid.UUID,
    kind: str,
    idempotency_key: str,
    destination: str,
    artifact_sha256: str,
) -> TaskOperation:
    """Record the operation id and key *before* the side effect, so an unknown outcome can be reconciled."""
    session.execute(
        insert(TaskOperation)
        .values(
            tenant_id=tenant_id,
            operation_id=operation_id,
            task_id=task_id,
            kind=kind,
            idempotency_key=idempotency_key,
            destination=destination,
            artifact_sha256=artifact_sha256,
            status="PENDING",
        )
        .on_conflict_do_nothing()
    )
    return get_operation(session, tenant_id, operation_id)


def update_operation(session: Session, tenant_id: str, operation_id: uuid.UUID, **values: Any) -> TaskOperation:
    session.execute(
        update(TaskOperation)
        .where(TaskOperation.tenant_id == tenant_id, TaskOperation.operation_id == operation_id)
        .values(**values, updated_at=func.now())
    )
    return get_operation(session, tenant_id, operation_id)


# --- reads --------------------------------------------------------------------------------------


def list_tasks(
    session: Session, tenant_id: str, *, owner_user_id: str | None, status: str | None, limit: int
) -> list[Task]:
    query = select(Task).where(Task.tenant_id == tenant_id)
    if owner_user_id is not None:
        query = query.where(Task.owner_user_id == owner_user_id)
    if status is not None:
        query = query.where(Task.status == status)
    return list(session.execute(query.order_by(Task.updated_at.desc(), Task.task_id).limit(limit)).scalars())


def operations(session: Session, tenant_id: str, task_id: str) -> list[TaskOperation]:
    return list(
        session.execute(
            select(TaskOperation)
            .where(TaskOperation.tenant_id == tenant_id, TaskOperation.task_id == task_id)
            .order_by(TaskOperation.created_at, TaskOperation.operation_id)
        ).scalars()
    )


def pending_approval(session: Session, tenant_id: str, task_id: str) -> TaskApproval | None:
    return session.execute(
        select(TaskApproval)
        .where(TaskApproval.tenant_id == tenant_id, TaskApproval.task_id == task_id, TaskApproval.status == "PENDING")
        .order_by(TaskApproval.requested_at.desc())
        .limit(1)
    ).scalar_one_or_none()


def timeline(session: Session, tenant_id: str, task_id: str) -> list[dict[str, Any]]:
    """Attempts, checkpoints, approvals, reminders and operations of a task, in time order."""
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
                "at": ap.requested_at,
                "kind": "approval",
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
