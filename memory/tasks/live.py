"""The live task as its workflow holds it, and the requests people make of it.

These are Temporal payloads (the ``state`` query's answer and the Updates' arguments): their field
names and JSON shape are fixed by running workflows and recorded histories. The rules that judge a
request against the live task: :func:`memory.tasks.approvals.check_decision`,
:mod:`memory.tasks.controls` (pause, resume, cancel) and :func:`memory.tasks.operations.check_resolve`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus


@dataclass
class PendingApproval:
    approval_id: str
    artifact_sha256: str
    approval_type: str
    summary: str
    deadline_at: str
    reminders_sent: int = 0


@dataclass
class OperationRef:
    operation_id: str
    kind: str
    destination: str
    status: str
    publication_id: str | None = None
    location: str | None = None


@dataclass
class TaskState:
    """What the ``state`` query answers: the live task, including what the read model has not seen yet.

    Its identity fields stay flat (not a nested :class:`TaskRef`): the query's JSON shape is public.
    """

    task_id: str
    tenant_id: str
    owner_user_id: str
    task_type: str
    goal: dict[str, Any]
    workflow_id: str
    workflow_version: str
    status: str = TaskStatus.CREATED.value
    current_step_id: str | None = None
    completed_step_ids: list[str] = field(default_factory=list)
    state_version: int = 0
    waiting_reason: str | None = None
    draft_sha256: str | None = None
    draft_revision: int = 0
    pending_approval: PendingApproval | None = None
    operations: list[OperationRef] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    pause_requested: bool = False
    error: dict[str, Any] | None = None

    @property
    def ref(self) -> TaskRef:
        return TaskRef(self.tenant_id, self.task_id)


@dataclass(frozen=True)
class ApprovalDecision:
    decision: str
    artifact_sha256: str
    state_version: int
    user_id: str
    roles: list[str]
    reason: str | None = None
    owner_may_decide: bool = False
    """The tenant's policy at decision time (``memory.store.policies``): False under separation of duties."""


@dataclass(frozen=True)
class ControlRequest:
    user_id: str
    roles: list[str]
    reason: str | None = None


@dataclass(frozen=True)
class ResolveRequest:
    operation_id: str
    outcome: str
    note: str
    user_id: str
    roles: list[str]
