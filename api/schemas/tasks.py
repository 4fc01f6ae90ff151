"""Request and response bodies of the report task endpoints, and how a task is shown.

A task is shown from one of two places: its live workflow (``source: workflow``) or, once it closed,
its read model (``source: read_model``). The two views carry different fields, so the response
models declare every field optional and the endpoints answer with ``response_model_exclude_unset``:
a body holds exactly the fields its source has.
"""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from api.schemas.common import MAX_SAFE_INTEGER, Integer, ShortText, StrictRequest
from memory.tasks import destinations, registry
from memory.tasks.live import TaskState
from memory.tasks.models import Task, TaskApproval, TaskOperation

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Reason = Annotated[str, Field(min_length=1, max_length=2_000)]


# --- requests ------------------------------------------------------------------------------------


class TaskCreateIn(StrictRequest):
    task_type: Annotated[str, Field(max_length=63, description="A registered task type, e.g. monthly-report",
                                    examples=["monthly-report"])]
    request_intent_id: ShortText
    goal: dict[str, Any] = Field(description="Checked against the task type's goal schema, e.g. the monthly "
                                 'report\'s {"month": "2026-06", "currency": "CNY"}')
    destination: Annotated[str, Field(pattern=destinations.NAME.pattern)] | None = Field(
        default=None, description="Publish here instead of the destination each publish step names")
    approval_deadline_seconds: Integer = Field(default=3 * 86_400, ge=60, le=90 * 86_400)
    approval_reminder_seconds: Integer = Field(default=86_400, ge=60, le=90 * 86_400)


def document_task_types(schemas: dict[str, Any]) -> None:
    """``POST /tasks`` in the OpenAPI: one alternative per task type this process loaded, naming the type and its
    goal schema (as registered), so a client sees which goal each type takes."""
    base = schemas["TaskCreateIn"]
    variants = []
    for name in sorted(registry.task_types()):
        definition = registry.definition(name)
        assert definition is not None
        variant = copy.deepcopy(base)
        variant["title"] = f"TaskCreateIn ({name})"
        variant["properties"]["task_type"] = {**variant["properties"]["task_type"], "const": name}
        variant["properties"]["goal"] = {**definition.goal_schema,
                                         "description": variant["properties"]["goal"].get("description", "")}
        variants.append(variant)
    schemas["TaskCreateIn"] = variants[0] if len(variants) == 1 else {"oneOf": variants, "title": "TaskCreateIn"}


class DecisionIn(StrictRequest):
    decision: Literal["approve", "reject"]
    artifact_sha256: SHA256
    state_version: Integer = Field(ge=0, le=MAX_SAFE_INTEGER)
    reason: Reason | None = None


class ControlIn(StrictRequest):
    reason: Reason | None = None


class ResolveIn(StrictRequest):
    outcome: Literal["published", "not_published"]
    note: Reason


class SampleDataIn(StrictRequest):
    lines: Integer = Field(default=120_000, ge=100, le=500_000)
    seed: Integer = Field(default=20260601, ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)


# --- responses -----------------------------------------------------------------------------------


class TaskCreatedOut(BaseModel):
    task_id: str
    status: str
    state_version: int
    workflow_id: str
    replayed: bool


class PendingApprovalOut(BaseModel):
    approval_id: str | None = None
    artifact_sha256: str | None = None
    approval_type: str | None = None
    summary: str | None = None
    deadline_at: str | None = None
    reminders_sent: int | None = None


class OperationOut(BaseModel):
    operation_id: str
    kind: str
    destination: str
    status: str
    publication_id: str | None = None
    location: str | None = None

    @classmethod
    def of(cls, op: TaskOperation) -> OperationOut:
        return cls(
            operation_id=str(op.operation_id),
            kind=op.kind,
            destination=op.destination,
            status=op.status,
            publication_id=op.publication_id,
            location=op.location,
        )


_SHARED = (
    "task_id", "task_type", "owner_user_id", "goal", "status", "current_step_id", "state_version",
    "waiting_reason", "draft_sha256", "workflow_id", "workflow_version", "error",
)
"""What the read model's row and the live state both know of a task, under the same names."""


def _shared(source: Task | TaskState) -> dict[str, Any]:
    return {name: getattr(source, name) for name in _SHARED} | {"completed_step_ids": list(source.completed_step_ids)}


class TaskView(BaseModel):
    """A task as its owner, approvers, operators and auditors see it."""

    task_id: str
    task_type: str | None = None
    owner_user_id: str | None = None
    goal: dict[str, Any] | None = None
    status: str
    current_step_id: str | None = None
    completed_step_ids: list[str] | None = None
    state_version: int
    waiting_reason: str | None = None
    draft_sha256: str | None = None
    workflow_id: str
    run_id: str | None = None
    workflow_version: str | None = None
    error: dict[str, Any] | None = None
    updated_at: str | None = None
    pending_approval: PendingApprovalOut | None = None
    pause_requested: bool | None = None
    decisions: list[dict[str, Any]] | None = None
    operations: list[OperationOut] | None = None
    publications: list[OperationOut] | None = None
    source: Literal["workflow", "read_model"] | None = None

    @classmethod
    def row(cls, task: Task) -> TaskView:
        """The read model's row alone (the task list)."""
        return cls(**_shared(task), run_id=task.run_id, updated_at=task.updated_at.isoformat())

    @classmethod
    def from_read_model(cls, task: Task, pending: TaskApproval | None, ops: list[TaskOperation]) -> TaskView:
        view = cls.row(task)
        view.pending_approval = None if pending is None else PendingApprovalOut(
            approval_id=str(pending.approval_id),
            artifact_sha256=pending.artifact_sha256,
            deadline_at=pending.deadline_at.isoformat(),
            reminders_sent=pending.reminders_sent,
        )
        view.operations = [OperationOut.of(op) for op in ops]
        view.publications = [OperationOut.of(op) for op in ops if op.status == "SUCCEEDED"]
        view.source = "read_model"
        return view

    @classmethod
    def from_live(cls, state: TaskState, run_id: str | None) -> TaskView:
        ops = [OperationOut(**asdict(op)) for op in state.operations]
        pending = state.pending_approval
        return cls(
            **_shared(state),
            run_id=run_id,
            pending_approval=None if pending is None else PendingApprovalOut(**asdict(pending)),
            pause_requested=state.pause_requested,
            decisions=state.decisions,
            operations=ops,
            publications=[op for op in ops if op.status == "SUCCEEDED"],
            source="workflow",
        )

    @classmethod
    def not_recorded_yet(cls, task_id: str, workflow_id: str, run_id: str | None) -> TaskView:
        """Started, but its first activity has not written the read model yet."""
        return cls(
            task_id=task_id,
            status="CREATED",
            current_step_id=None,
            state_version=0,
            pending_approval=None,
            publications=[],
            operations=[],
            workflow_id=workflow_id,
            run_id=run_id,
            source="workflow",
        )


class TaskListOut(BaseModel):
    items: list[TaskView]


class DecisionOut(BaseModel):
    approval_id: str
    decision: str
    status: str
    state_version: int
    replayed: bool


class TimelineOut(BaseModel):
    task_id: str
    status: str
    state_version: int
    workflow_id: str
    run_id: str | None = None
    workflow_status: str | None = None
    entries: list[dict[str, Any]]


class SampleDataOut(BaseModel):
    tenant_lines: int


class PublicationOut(BaseModel):
    publication_id: str | None
    destination: str
    artifact_sha256: str
    url: str | None = Field(description="archive: this API's URL of the published artifact (same access as the "
                                        "task); webhook: the URL the receiver answered with, if any")


class PublicationListOut(BaseModel):
    items: list[PublicationOut]
