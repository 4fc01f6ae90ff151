"""The task row and its transitions. Every task write names the ``state_version`` it expects.

A write that finds another version is refused (:class:`VersionConflict`), except
the replay of the very same transition (same ``transition_id``), which returns
the row as it left it: an activity retried after its commit changes nothing.
Each transition that names a ``checkpoint_reason`` leaves a checkpoint (seed 003 §8.1).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import NotFound, VersionConflict
from memory.tasks.models import Task, TaskArtifact, TaskCheckpoint
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus, TransitionFacts, check_transition

KEEP = "__keep__"
"""Sentinel for :class:`Transition` fields that leave the column as it is."""


@dataclass(frozen=True)
class NewTask:
    ref: TaskRef
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
class Snapshot:
    """Where a transition left the task: what an activity hands back to the workflow (a Temporal payload)."""

    state_version: int
    status: str
    error: dict[str, Any] | None = None


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
    facts: TransitionFacts = field(default_factory=TransitionFacts)
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
            tenant_id=new.ref.tenant_id,
            task_id=new.ref.task_id,
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
    task = get_task(session, new.ref.tenant_id, new.ref.task_id)
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


def move(session: Session, ref: TaskRef, change: Transition) -> Snapshot:
    """:func:`apply_transition`, answered as the :class:`Snapshot` the workflow follows."""
    task = apply_transition(session, ref.tenant_id, ref.task_id, change)
    return Snapshot(task.state_version, task.status, task.error)
