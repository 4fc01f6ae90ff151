"""What the report task's activities take and answer: Temporal payloads.

Their field names and JSON shape are part of every running workflow and recorded history
(``tests/tasks/test_replay.py``), so the task identity stays two flat fields, declared once in
:class:`TaskPayload`, rather than a nested :class:`~memory.tasks.ref.TaskRef` (which would change the
JSON and fail to decode the payloads already scheduled); ``.ref`` hands the identity to ``memory.tasks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory.tasks.ref import TaskRef
from memory.tasks.transitions import KEEP


@dataclass(frozen=True)
class TaskPayload:
    tenant_id: str
    task_id: str

    @property
    def ref(self) -> TaskRef:
        return TaskRef(self.tenant_id, self.task_id)


@dataclass(frozen=True)
class CreateTaskInput(TaskPayload):
    owner_user_id: str
    task_type: str
    goal: dict[str, Any]
    request_intent_id: str
    destination: str
    workflow_id: str
    run_id: str
    workflow_version: str
    destinations: list[str] = field(default_factory=list)
    """Every publish step's destination besides ``destination`` (the first): all must exist for the task to run."""


@dataclass(frozen=True)
class RunStepInput(TaskPayload):
    task_type: str
    step_id: str
    next_step_id: str | None
    input_version: str
    goal: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    extra: dict[str, Any]
    expected_version: int
    function: str = ""
    """The registered step function; empty in payloads from before definitions: ``<task_type>.<step_id>``."""
    artifacts: dict[str, dict[str, str]] = field(default_factory=dict)
    """Earlier steps' artifacts: step id → artifact name → sha256."""
    kind: str = "compute"
    """``compute`` (the registered ``function``) or ``llm`` (the prompt in ``spec``)."""
    spec: dict[str, Any] = field(default_factory=dict)
    """The step's keys as its definition declares them (an llm step's prompt, a step's ``recall``)."""
    owner_user_id: str = ""
    """Whose memories a step's ``recall`` reads: the task's owner."""


@dataclass(frozen=True)
class OpenAgentStepInput(TaskPayload):
    step_id: str
    input_version: str
    extra: dict[str, Any]
    expected_version: int


@dataclass(frozen=True)
class CollectAgentStepInput(TaskPayload):
    step_id: str
    input_version: str
    next_step_id: str | None
    expected_version: int


@dataclass(frozen=True)
class AgentStepCollected:
    """``status``: SUCCEEDED (``output``, ``artifacts`` name → sha256), GAVE_UP (``error``) or WAITING."""

    status: str
    state_version: int
    output: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunStepResult:
    output: dict[str, Any]
    state_version: int
    replayed: bool
    artifacts: dict[str, str] = field(default_factory=dict)
    """This step's artifacts, name → sha256 (what an approval's ``artifact_from`` names)."""


@dataclass(frozen=True)
class TransitionInput(TaskPayload):
    expected_version: int
    transition_id: str
    target: str
    checkpoint_reason: str
    current_step_id: str | None = KEEP
    waiting_reason: str | None = None
    error: dict[str, Any] | None = None
    pending_conditions: list[dict[str, Any]] = field(default_factory=list)
    cancel_pending_approvals: bool = False
    force_from_newer_version: bool = False
    """For the workflow's own failure verdict only: apply it even if a late attempt moved the
    read model past ``expected_version`` (the status machine still guards the edge)."""


@dataclass(frozen=True)
class RequestApprovalInput(TaskPayload):
    task_type: str
    goal: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    draft_sha256: str
    deadline_at: str
    """ISO 8601, with a time zone."""
    expected_version: int
    step_id: str = "request_approval"
    """Defaults: what payloads from before definitions meant (the monthly report's approval)."""
    approval_type: str = "publish"
    version: str = "monthly-report-v1"


@dataclass(frozen=True)
class ApprovalRequested:
    approval_id: str
    approval_type: str
    summary: str
    state_version: int


@dataclass(frozen=True)
class DecideInput(TaskPayload):
    approval_id: str
    decision: str
    user_id: str
    roles: list[str]
    reason: str | None
    expected_version: int
    redraft_step: str
    step_id: str = "request_approval"
    next_step_id: str | None = "publish_report"
    """Defaults: what payloads from before definitions meant (the monthly report's approval, then its publish)."""


@dataclass(frozen=True)
class ReminderInput:
    """Addressed to the approval (its id names the task), so it carries no task id."""

    tenant_id: str
    approval_id: str
    number: int


@dataclass(frozen=True)
class ExpireInput(TaskPayload):
    approval_id: str
    expected_version: int


@dataclass(frozen=True)
class PublishInput(TaskPayload):
    task_type: str
    goal: dict[str, Any]
    operation_id: str
    artifact_sha256: str
    approval_id: str
    destination: str
    expected_version: int
    step_id: str = "publish_report"
    """Default: what payloads from before definitions meant (the monthly report's publish)."""


@dataclass(frozen=True)
class OperationResult:
    """``status``: SUCCEEDED, UNKNOWN_OUTCOME, ABSENT (definitely not there) or FAILED."""

    status: str
    state_version: int
    publication_id: str | None = None
    location: str | None = None


@dataclass(frozen=True)
class ReconcileInput(TaskPayload):
    operation_id: str
    destination: str
    expected_version: int
    step_id: str = "publish_report"


@dataclass(frozen=True)
class ResolveInput(TaskPayload):
    operation_id: str
    destination: str
    outcome: str
    user_id: str
    note: str
    expected_version: int
    step_id: str = "publish_report"
