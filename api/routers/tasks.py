"""Durable report tasks: create, read, approve, control, resolve, and their artifacts and timeline.

Identity (tenant, user, roles) comes only from the API key; the workflow id
``task-{tenant}-{task}`` is built from the caller's tenant, so another tenant's
task is the same 404 as a missing one. Open tasks are read live from the
workflow (a query); closed tasks from the read model.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.report.definitions import DEFINITIONS
from activities.stores import ArtifactStore
from api.deps import CurrentPrincipal, EngineDep
from api.errors import TemporalUnavailable
from api.schemas import MAX_SAFE_INTEGER, Integer, ShortText, StrictRequest
from api.temporal import connect
from memory.auth import PrincipalContext
from memory.db import tenant_session
from memory.enums import Role
from memory.errors import Conflict, Forbidden, IdempotencyConflict, InvalidInput, MnemoError, NotFound
from memory.policies import Policy, tenant_policy
from memory.tasks import keys, store
from memory.tasks.models import Task
from workflows import search_attributes
from workflows.report_task import (
    ApprovalDecision,
    ApprovalPolicy,
    ControlRequest,
    ReportTaskInput,
    ReportTaskWorkflow,
    ResolveRequest,
    TaskState,
)

router = APIRouter(tags=["tasks"])
SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
_TASK_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# --- request and response models -----------------------------------------------------------------


class GoalIn(StrictRequest):
    month: Annotated[
        str, Field(pattern=r"^(19\d\d|2[01]\d\d)-(0[1-9]|1[0-2])$", description="YYYY-MM, years 1900 to 2199 (as timestamps)")
    ]
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")]


class TaskCreateIn(StrictRequest):
    task_type: Literal["monthly-report"]
    request_intent_id: ShortText
    goal: GoalIn
    destination: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")] = "reports"
    approval_deadline_seconds: Integer = Field(default=3 * 86_400, ge=60, le=90 * 86_400)
    approval_reminder_seconds: Integer = Field(default=86_400, ge=60, le=90 * 86_400)


class TaskCreatedOut(BaseModel):
    task_id: str
    status: str
    state_version: int
    workflow_id: str
    replayed: bool


class DecisionIn(StrictRequest):
    decision: Literal["approve", "reject"]
    artifact_sha256: SHA256
    state_version: Integer = Field(ge=0, le=MAX_SAFE_INTEGER)
    reason: Annotated[str, Field(min_length=1, max_length=2_000)] | None = None


class ControlIn(StrictRequest):
    reason: Annotated[str, Field(min_length=1, max_length=2_000)] | None = None


class ResolveIn(StrictRequest):
    outcome: Literal["published", "not_published"]
    note: Annotated[str, Field(min_length=1, max_length=2_000)]


class SampleDataIn(StrictRequest):
    lines: Integer = Field(default=120_000, ge=100, le=500_000)
    seed: Integer = Field(default=20260601, ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)


# --- the Temporal side ---------------------------------------------------------------------------


async def _temporal(request: Request) -> Client:
    client: Client | None = request.app.state.temporal
    if client is None:
        try:
            client = await connect(request.app.state.settings)
        except Exception as exc:  # the SDK raises plain RuntimeError on connection failure
            raise TemporalUnavailable(f"Temporal is not reachable: {exc}") from exc
        request.app.state.temporal = client
    return client


def _task_id(raw: str) -> str:
    if not _TASK_ID.match(raw):
        raise NotFound(f"task {raw} does not exist")
    return raw


async def _describe(handle: WorkflowHandle[Any, Any]) -> Any | None:
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise TemporalUnavailable(f"Temporal could not describe {handle.id}: {exc.message}") from exc


async def _live_state(handle: WorkflowHandle[Any, Any]) -> TaskState | None:
    try:
        state: TaskState | None = await handle.query(
            ReportTaskWorkflow.state, rpc_timeout=timedelta(seconds=5)
        )
    except RPCError:
        return None
    return state


def _refusal(exc: WorkflowUpdateFailedError) -> MnemoError:
    cause = exc.cause
    if not isinstance(cause, ApplicationError):
        return Conflict(f"the task refused the request: {cause}")
    code, message = cause.type or "refused", cause.message
    if code in ("forbidden", "separation_of_duties"):
        return Forbidden(message, code=code)
    if code in ("reason_required", "invalid_decision", "invalid_outcome"):
        return InvalidInput(message, code=code)
    return Conflict(message, code=code)


async def _update(handle: WorkflowHandle[Any, Any], update: Any, arg: Any) -> Any:
    try:
        return await handle.execute_update(update, arg)
    except WorkflowUpdateFailedError as exc:
        raise _refusal(exc) from exc
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise Conflict("the task has already ended", code="task_closed") from exc
        raise TemporalUnavailable(f"Temporal refused the update: {exc.message}") from exc


# --- the read model side -------------------------------------------------------------------------


def _read_task(engine: Any, tenant_id: str, task_id: str) -> dict[str, Any]:
    with tenant_session(engine, tenant_id) as session:
        task = store.get_task(session, tenant_id, task_id)
        pending = store.pending_approval(session, tenant_id, task_id)
        ops = store.operations(session, tenant_id, task_id)
        return {
            **_task_row(task),
            "pending_approval": None
            if pending is None
            else {
                "approval_id": str(pending.approval_id),
                "artifact_sha256": pending.artifact_sha256,
                "deadline_at": pending.deadline_at.isoformat(),
                "reminders_sent": pending.reminders_sent,
            },
            "operations": [_operation(op) for op in ops],
            "publications": [_operation(op) for op in ops if op.status == "SUCCEEDED"],
            "source": "read_model",
        }


def _task_row(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "task_type": task.task_type,
        "owner_user_id": task.owner_user_id,
        "goal": task.goal,
        "status": task.status,
        "current_step_id": task.current_step_id,
        "completed_step_ids": list(task.completed_step_ids),
        "state_version": task.state_version,
        "waiting_reason": task.waiting_reason,
        "draft_sha256": task.draft_sha256,
        "workflow_id": task.workflow_id,
        "run_id": task.run_id,
        "workflow_version": task.workflow_version,
        "error": task.error,
        "updated_at": task.updated_at.isoformat(),
    }


def _operation(op: Any) -> dict[str, Any]:
    return {
        "operation_id": str(op.operation_id),
        "kind": op.kind,
        "destination": op.destination,
        "status": op.status,
        "publication_id": op.publication_id,
        "location": op.location,
    }


def _from_live(state: TaskState, run_id: str | None) -> dict[str, Any]:
    ops = [asdict(op) for op in state.operations]
    pending = state.pending_approval
    return {
        "task_id": state.task_id,
        "task_type": state.task_type,
        "owner_user_id": state.owner_user_id,
        "goal": state.goal,
        "status": state.status,
        "current_step_id": state.current_step_id,
        "completed_step_ids": list(state.completed_step_ids),
        "state_version": state.state_version,
        "waiting_reason": state.waiting_reason,
        "draft_sha256": state.draft_sha256,
        "workflow_id": state.workflow_id,
        "run_id": run_id,
        "workflow_version": state.workflow_version,
        "error": state.error,
        "pending_approval": None if pending is None else asdict(pending),
        "pause_requested": state.pause_requested,
        "decisions": state.decisions,
        "operations": ops,
        "publications": [op for op in ops if op["status"] == "SUCCEEDED"],
        "source": "workflow",
    }


async def _task_view(request: Request, engine: Any, principal: PrincipalContext, task_id: str) -> dict[str, Any]:
    client = await _temporal(request)
    handle = client.get_workflow_handle(keys.workflow_id(principal.tenant_id, task_id))
    described = await _describe(handle)
    if described is not None and described.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
        state = await _live_state(handle)
        if state is not None and state.tenant_id == principal.tenant_id:
            return _from_live(state, described.run_id)
    if described is None:
        return await run_in_threadpool(_read_task, engine, principal.tenant_id, task_id)
    try:
        return await run_in_threadpool(_read_task, engine, principal.tenant_id, task_id)
    except NotFound:
        # Started, but its first activity has not written the read model yet.
        return {
            "task_id": task_id,
            "status": "CREATED",
            "current_step_id": None,
            "state_version": 0,
            "pending_approval": None,
            "publications": [],
            "operations": [],
            "workflow_id": handle.id,
            "run_id": described.run_id,
            "source": "workflow",
        }


READ_ANY_TASK = (Role.APPROVER, Role.OPERATOR, Role.AUDITOR)


def _readable(principal: PrincipalContext, owner_user_id: str | None, task_id: str) -> None:
    """A task is its owner's; approvers, operators and auditors read every task of their tenant.
    Anyone else gets the 404 of a task that does not exist."""
    if owner_user_id is not None and owner_user_id != principal.user_id and not any(
        principal.has(role) for role in READ_ANY_TASK
    ):
        raise NotFound(f"task {task_id} does not exist")


def _owner_in_read_model(engine: Any, tenant_id: str, task_id: str) -> str | None:
    with tenant_session(engine, tenant_id) as session:
        return store.task_owner(session, tenant_id, task_id)


async def _gate(engine: Any, principal: PrincipalContext, task_id: str, *, control: bool = False) -> None:
    """Refuse a task the caller may not see from the read model, before any Temporal call.

    Another user's task must be indistinguishable from a missing one (issue 12, finding 11): the same 404
    body, and no extra round trip to Temporal that would make it slower than a random id. A task with no
    row yet (its first activity has not run) goes on to Temporal like a missing one, and the owner check
    there (the live state, the workflow's validators) decides. ``control``: the owner and operators (and
    admins) may pause, resume and cancel, and readers (approvers, auditors) see it and so get the 403.
    """
    owner = await run_in_threadpool(_owner_in_read_model, engine, principal.tenant_id, task_id)
    if owner is None or owner == principal.user_id:
        return
    if control and any(principal.has(role) for role in CONTROL_ANY_TASK):
        return
    _readable(principal, owner, task_id)


CONTROL_ANY_TASK = (Role.OPERATOR, Role.ADMIN)
"""Who may control another user's task (the workflow's ``OPERATOR_ROLES``)."""


def _require(principal: PrincipalContext, role: Role, action: str) -> None:
    if not principal.has(role):
        raise Forbidden(f"{action} needs the {role.value} role")


# --- endpoints -----------------------------------------------------------------------------------


@router.post(
    "/tasks",
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": TaskCreatedOut, "description": "A replay of the same request_intent_id: the task it started"}},
)
async def create_task(
    body: TaskCreateIn, request: Request, principal: CurrentPrincipal, engine: EngineDep, response: Response
) -> TaskCreatedOut:
    """Start a report task. The same (user, request_intent_id) always names the same task (200 on replay)."""
    definition = DEFINITIONS[body.task_type]
    if body.goal.currency not in definition.currencies:
        raise InvalidInput(
            f"goal.currency must be one of {', '.join(definition.currencies)}", code="unsupported_currency"
        )
    goal = body.goal.model_dump()
    task_id = keys.task_id_for(principal.tenant_id, principal.user_id, body.request_intent_id)
    workflow_id = keys.workflow_id(principal.tenant_id, task_id)
    client = await _temporal(request)
    handle = client.get_workflow_handle(workflow_id)
    described = await _describe(handle)
    if described is None:
        try:
            handle = await client.start_workflow(
                ReportTaskWorkflow.run,
                ReportTaskInput(
                    tenant_id=principal.tenant_id,
                    task_id=task_id,
                    owner_user_id=principal.user_id,
                    task_type=body.task_type,
                    goal=goal,
                    request_intent_id=body.request_intent_id,
                    destination=body.destination,
                    approval=ApprovalPolicy(body.approval_deadline_seconds, body.approval_reminder_seconds),
                ),
                id=workflow_id,
                task_queue=request.app.state.settings.task_queue,
                # A concurrent first start of the same task loses here and goes through the replay
                # path below, where a different goal is a conflict instead of a silent "created".
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(search_attributes.TENANT, principal.tenant_id),
                        SearchAttributePair(search_attributes.TASK_TYPE, body.task_type),
                        SearchAttributePair(search_attributes.STATUS, "CREATED"),
                    ]
                ),
            )
            view = await _task_view(request, engine, principal, task_id)
            return TaskCreatedOut(
                task_id=task_id, status=view["status"], state_version=view["state_version"], workflow_id=workflow_id, replayed=False
            )
        except WorkflowAlreadyStartedError:
            pass
    view = await _task_view(request, engine, principal, task_id)
    if "goal" in view and (view["goal"] != goal or view["task_type"] != body.task_type):
        raise IdempotencyConflict(
            f"request_intent_id {body.request_intent_id!r} already started task {task_id} with another goal; "
            "use a new request_intent_id for a new task",
            details={"task_id": task_id},
        )
    response.status_code = status.HTTP_200_OK
    return TaskCreatedOut(
        task_id=task_id, status=view["status"], state_version=view["state_version"], workflow_id=workflow_id, replayed=True
    )


@router.get("/tasks")
def list_tasks(
    principal: CurrentPrincipal,
    engine: EngineDep,
    owner: Annotated[Literal["me", "all"], Query(description="'all' needs the approver, operator or auditor role")] = "me",
    task_status: Annotated[str | None, Query(alias="status", pattern=r"^[A-Z_]{3,32}$")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """Tasks from the read model, most recently changed first: by default the caller's own."""
    if owner == "all" and not any(principal.has(role) for role in (Role.APPROVER, Role.OPERATOR, Role.AUDITOR)):
        raise Forbidden("listing every task of the tenant needs the approver, operator or auditor role")
    with tenant_session(engine, principal.tenant_id) as session:
        rows = store.list_tasks(
            session,
            principal.tenant_id,
            owner_user_id=principal.user_id if owner == "me" else None,
            status=task_status,
            limit=limit,
        )
        return {"items": [_task_row(row) for row in rows]}


@router.get("/tasks/{task_id}")
async def get_task(task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    """Live state from the workflow while it runs; the read model once it has closed."""
    task_id = _task_id(task_id)
    await _gate(engine, principal, task_id)
    view = await _task_view(request, engine, principal, task_id)
    _readable(principal, view.get("owner_user_id"), task_id)
    return view


async def _open_handle(
    request: Request, engine: Any, principal: PrincipalContext, task_id: str, *, control: bool = False
) -> WorkflowHandle[Any, Any]:
    await _gate(engine, principal, _task_id(task_id), control=control)
    client = await _temporal(request)
    handle = client.get_workflow_handle(keys.workflow_id(principal.tenant_id, _task_id(task_id)))
    described = await _describe(handle)
    if described is None:
        raise NotFound(f"task {task_id} does not exist")
    if described.status != WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
        view = await run_in_threadpool(_read_task, engine, principal.tenant_id, task_id)
        raise Conflict(f"the task has already ended ({view['status']})", code="task_closed")
    return handle


@router.post("/tasks/{task_id}/approvals")
async def decide(task_id: str, body: DecisionIn, request: Request, principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    """Approve or reject the current draft, bound to its sha256 and the task's state_version."""
    _require(principal, Role.APPROVER, "approving or rejecting a draft")
    if body.decision == "reject" and body.reason is None:
        raise InvalidInput("a rejection needs a reason, so the draft can be revised", code="reason_required")
    handle = await _open_handle(request, engine, principal, task_id)
    policy = await run_in_threadpool(_policy, engine, principal.tenant_id)
    result = await _update(
        handle,
        ReportTaskWorkflow.decide,
        ApprovalDecision(
            decision=body.decision,
            artifact_sha256=body.artifact_sha256,
            state_version=body.state_version,
            user_id=principal.user_id,
            roles=sorted(principal.roles),
            reason=body.reason,
            owner_may_decide=not policy.separation_of_duties,
        ),
    )
    return asdict(result)


def _policy(engine: Any, tenant_id: str) -> Policy:
    with tenant_session(engine, tenant_id) as session:
        return tenant_policy(session, tenant_id)


async def _control(
    update: Any, task_id: str, body: ControlIn | None, request: Request, principal: CurrentPrincipal, engine: Any
) -> dict[str, Any]:
    handle = await _open_handle(request, engine, principal, task_id, control=True)
    try:
        state: TaskState = await _update(
            handle, update, ControlRequest(principal.user_id, sorted(principal.roles), body.reason if body else None)
        )
    except Forbidden as exc:
        # Only reachable before the read model has the task: a caller who cannot see it hears a missing task.
        if not any(principal.has(role) for role in READ_ANY_TASK):
            raise NotFound(f"task {task_id} does not exist") from exc
        raise
    return _from_live(state, None)


@router.post("/tasks/{task_id}/pause")
async def pause(task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep, body: ControlIn | None = None) -> dict[str, Any]:
    """Pause at the next step boundary (the running step finishes first)."""
    return await _control(ReportTaskWorkflow.pause, task_id, body, request, principal, engine)


@router.post("/tasks/{task_id}/resume")
async def resume(task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep, body: ControlIn | None = None) -> dict[str, Any]:
    return await _control(ReportTaskWorkflow.resume, task_id, body, request, principal, engine)


@router.post("/tasks/{task_id}/cancel")
async def cancel(task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep, body: ControlIn | None = None) -> dict[str, Any]:
    """Cancel; answers once the task is CANCELLED. Refused while a publication's outcome is unknown."""
    return await _control(ReportTaskWorkflow.cancel, task_id, body, request, principal, engine)


@router.post("/tasks/{task_id}/operations/{operation_id}/resolve")
async def resolve(
    task_id: str, operation_id: str, body: ResolveIn, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    """An operator's verdict on a side effect whose outcome stayed unknown after reconciliation."""
    _require(principal, Role.OPERATOR, "resolving an operation")
    handle = await _open_handle(request, engine, principal, task_id)
    result = await _update(
        handle,
        ReportTaskWorkflow.resolve_operation,
        ResolveRequest(operation_id, body.outcome, body.note, principal.user_id, sorted(principal.roles)),
    )
    return asdict(result)


@router.get("/tasks/{task_id}/artifacts/{sha256}")
def get_artifact(task_id: str, sha256: str, request: Request, principal: CurrentPrincipal, engine: EngineDep) -> Response:
    """The artifact's bytes, if this task in the caller's tenant produced them."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise NotFound(f"artifact {sha256} does not exist in task {task_id}")
    with tenant_session(engine, principal.tenant_id) as session:
        _readable(principal, store.get_task(session, principal.tenant_id, _task_id(task_id)).owner_user_id, task_id)
        artifact = store.get_artifact(session, principal.tenant_id, _task_id(task_id), sha256)
    content = ArtifactStore(request.app.state.settings.data_dir / "artifacts").get(sha256)
    return Response(
        content,
        media_type=artifact.media_type,
        headers={"Content-Disposition": f'inline; filename="{artifact.name}"', "ETag": f'"{sha256}"'},
    )


@router.get("/tasks/{task_id}/timeline")
async def timeline(task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    """Attempts, checkpoints, approvals, reminders and operations merged in time order."""
    task_id = _task_id(task_id)

    def read() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        with tenant_session(engine, principal.tenant_id) as session:
            task = store.get_task(session, principal.tenant_id, task_id)
            return _task_row(task), store.timeline(session, principal.tenant_id, task_id)

    row, entries = await run_in_threadpool(read)
    _readable(principal, row["owner_user_id"], task_id)
    client = await _temporal(request)
    described = await _describe(client.get_workflow_handle(row["workflow_id"]))
    return {
        "task_id": task_id,
        "status": row["status"],
        "state_version": row["state_version"],
        "workflow_id": row["workflow_id"],
        "run_id": described.run_id if described is not None else row["run_id"],
        "workflow_status": described.status.name if described is not None and described.status else None,
        "entries": [
            {key: value.isoformat() if hasattr(value, "isoformat") else value for key, value in entry.items()}
            for entry in entries
        ],
    }


@router.post("/report-data/sample")
def seed_sample_data(principal: CurrentPrincipal, engine: EngineDep, body: SampleDataIn | None = None) -> dict[str, Any]:
    """Load the deterministic sample sales dataset into the caller's tenant, once (operator role)."""
    from memory.reportdata import seed_sales

    _require(principal, Role.OPERATOR, "loading sample sales data")
    body = body or SampleDataIn()
    with tenant_session(engine, principal.tenant_id) as session:
        lines = seed_sales(session, principal.tenant_id, total=body.lines, seed=body.seed)
    return {"tenant_lines": lines}

