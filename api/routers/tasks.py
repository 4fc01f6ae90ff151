"""Durable report tasks over HTTP: create, read, approve, control, resolve, and their artifacts and timeline.

Identity (tenant, user, roles) comes only from the API key; the workflow id
``task-{tenant}-{task}`` is built from the caller's tenant, so another tenant's
task is the same 404 as a missing one. Open tasks are read live from the
workflow (a query); closed tasks from the read model. The rules are elsewhere: who may do what in
:mod:`memory.auth`, what a decision or a control request may do in ``memory.tasks`` (run by the
workflow's Update validators); this module only translates HTTP.

Temporal is reached through :func:`api.deps.get_temporal`, called in the handler *after* the read-model
gate rather than as a ``TemporalDep`` parameter: a dependency is resolved before the handler runs, so a
colleague's task would then wait on (or fail with) Temporal instead of answering the 404 of a missing
task at once (issue 12, finding 11; ``tests/tasks/test_task_oracle.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.deps import CurrentPrincipal, EngineDep, get_temporal
from api.errors import TemporalUnavailable
from api.schemas.tasks import (
    ControlIn,
    DecisionIn,
    DecisionOut,
    OperationOut,
    ResolveIn,
    SampleDataIn,
    SampleDataOut,
    TaskCreatedOut,
    TaskCreateIn,
    TaskListOut,
    TaskView,
    TimelineOut,
)
from api.task_state import read_model_owner
from memory.auth import PrincipalContext, may_approve, may_operate, may_read_every_task
from memory.db import tenant_session
from memory.errors import Conflict, Forbidden, IdempotencyConflict, InvalidInput, MnemoError, NotFound
from memory.policies import Policy, tenant_policy
from memory.reports.definitions import DEFINITIONS
from memory.reports.sales import seed_sales
from memory.tasks import artifacts, keys, transitions
from memory.tasks.approvals import pending_approval
from memory.tasks.artifacts import task_store
from memory.tasks.live import ApprovalDecision, ControlRequest, ResolveRequest, TaskState
from memory.tasks.models import TaskArtifact
from memory.tasks.operations import operations
from memory.tasks.timeline import list_tasks as read_task_list
from memory.tasks.timeline import timeline as read_timeline
from workflows import search_attributes
from workflows.fairness import tenant_priority
from workflows.report_task import ApprovalPolicy, ReportTaskInput, ReportTaskWorkflow

router = APIRouter(tags=["tasks"])
_TASK_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# Task views are answered with response_model_exclude_unset: a view holds the fields its source has
# (the live workflow or the read model; see api.schemas.tasks).


def _task_id(raw: str) -> str:
    if not _TASK_ID.match(raw):
        raise NotFound(f"task {raw} does not exist")
    return raw


# --- the Temporal side ---------------------------------------------------------------------------


async def _describe(handle: WorkflowHandle[Any, Any]) -> Any | None:
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise TemporalUnavailable(f"Temporal could not describe {handle.id}: {exc.message}") from exc


async def _live_state(handle: WorkflowHandle[Any, Any]) -> TaskState | None:
    try:
        state: TaskState | None = await handle.query(ReportTaskWorkflow.state, rpc_timeout=timedelta(seconds=5))
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


# --- reading a task ------------------------------------------------------------------------------


def _read_task(engine: Engine, tenant_id: str, task_id: str) -> TaskView:
    with tenant_session(engine, tenant_id) as session:
        task = transitions.get_task(session, tenant_id, task_id)
        pending = pending_approval(session, tenant_id, task_id)
        return TaskView.from_read_model(task, pending, operations(session, tenant_id, task_id))


async def _task_view(request: Request, engine: Engine, principal: PrincipalContext, task_id: str) -> TaskView:
    client = await get_temporal(request)
    handle = client.get_workflow_handle(keys.workflow_id(principal.tenant_id, task_id))
    described = await _describe(handle)
    if described is not None and described.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
        state = await _live_state(handle)
        if state is not None and state.tenant_id == principal.tenant_id:
            return TaskView.from_live(state, described.run_id)
    if described is None:
        return await run_in_threadpool(_read_task, engine, principal.tenant_id, task_id)
    try:
        return await run_in_threadpool(_read_task, engine, principal.tenant_id, task_id)
    except NotFound:
        return TaskView.not_recorded_yet(task_id, handle.id, described.run_id)


def _readable(principal: PrincipalContext, owner_user_id: str | None, task_id: str) -> None:
    """A task is its owner's; approvers, operators and auditors read every task of their tenant.
    Anyone else gets the 404 of a task that does not exist."""
    others = owner_user_id is not None and owner_user_id != principal.user_id
    if others and not may_read_every_task(principal.roles):
        raise NotFound(f"task {task_id} does not exist")


async def _gate(engine: Engine, principal: PrincipalContext, task_id: str, *, control: bool = False) -> None:
    """Refuse a task the caller may not see from the read model, before any Temporal call.

    Another user's task must be indistinguishable from a missing one (issue 12, finding 11): the same 404
    body, and no extra round trip to Temporal that would make it slower than a random id. A task with no
    row yet (its first activity has not run) goes on to Temporal like a missing one, and the owner check
    there (the live state, the workflow's validators) decides. ``control``: the owner and operators (and
    admins) may pause, resume and cancel, and readers (approvers, auditors) see it and so get the 403.
    """
    owner = await run_in_threadpool(read_model_owner, engine, principal.tenant_id, task_id)
    if owner is None or owner == principal.user_id:
        return
    if control and may_operate(principal.roles):
        return
    _readable(principal, owner, task_id)


async def _open_handle(
    request: Request, engine: Engine, principal: PrincipalContext, task_id: str, *, control: bool = False
) -> WorkflowHandle[Any, Any]:
    task_id = _task_id(task_id)
    await _gate(engine, principal, task_id, control=control)
    client = await get_temporal(request)
    handle = client.get_workflow_handle(keys.workflow_id(principal.tenant_id, task_id))
    described = await _describe(handle)
    if described is None:
        raise NotFound(f"task {task_id} does not exist")
    if described.status != WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
        view = await run_in_threadpool(_read_task, engine, principal.tenant_id, task_id)
        raise Conflict(f"the task has already ended ({view.status})", code="task_closed")
    return handle


def tenant_policy_of(engine: Engine, tenant_id: str) -> Policy:
    """The tenant's policy (separation of duties), read at decision time."""
    with tenant_session(engine, tenant_id) as session:
        return tenant_policy(session, tenant_id)


# --- endpoints -----------------------------------------------------------------------------------


@router.post(
    "/tasks",
    status_code=status.HTTP_201_CREATED,
    response_model=TaskCreatedOut,
    responses={
        200: {"model": TaskCreatedOut, "description": "A replay of the same request_intent_id: the task it started"}
    },
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
    client = await get_temporal(request)
    handle = client.get_workflow_handle(workflow_id)
    if await _describe(handle) is None:
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
                priority=tenant_priority(principal.tenant_id),
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
                task_id=task_id, status=view.status, state_version=view.state_version, workflow_id=workflow_id,
                replayed=False,
            )
        except WorkflowAlreadyStartedError:
            pass
    view = await _task_view(request, engine, principal, task_id)
    if "goal" in view.model_fields_set and (view.goal != goal or view.task_type != body.task_type):
        raise IdempotencyConflict(
            f"request_intent_id {body.request_intent_id!r} already started task {task_id} with another goal; "
            "use a new request_intent_id for a new task",
            details={"task_id": task_id},
        )
    response.status_code = status.HTTP_200_OK
    return TaskCreatedOut(
        task_id=task_id, status=view.status, state_version=view.state_version, workflow_id=workflow_id, replayed=True
    )


@router.get("/tasks", response_model=TaskListOut, response_model_exclude_unset=True)
def list_tasks(
    principal: CurrentPrincipal,
    engine: EngineDep,
    owner: Annotated[
        Literal["me", "all"], Query(description="'all' needs the approver, operator or auditor role")
    ] = "me",
    task_status: Annotated[str | None, Query(alias="status", pattern=r"^[A-Z_]{3,32}$")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> TaskListOut:
    """Tasks from the read model, most recently changed first: by default the caller's own."""
    if owner == "all" and not may_read_every_task(principal.roles):
        raise Forbidden("listing every task of the tenant needs the approver, operator or auditor role")
    with tenant_session(engine, principal.tenant_id) as session:
        rows = read_task_list(
            session,
            principal.tenant_id,
            owner_user_id=principal.user_id if owner == "me" else None,
            status=task_status,
            limit=limit,
        )
        return TaskListOut(items=[TaskView.row(row) for row in rows])


@router.get("/tasks/{task_id}", response_model=TaskView, response_model_exclude_unset=True)
async def get_task(task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep) -> TaskView:
    """Live state from the workflow while it runs; the read model once it has closed."""
    task_id = _task_id(task_id)
    await _gate(engine, principal, task_id)
    view = await _task_view(request, engine, principal, task_id)
    _readable(principal, view.owner_user_id, task_id)
    return view


@router.post("/tasks/{task_id}/approvals", response_model=DecisionOut)
async def decide(
    task_id: str, body: DecisionIn, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> DecisionOut:
    """Approve or reject the current draft, bound to its sha256 and the task's state_version."""
    if not may_approve(principal.roles):
        raise Forbidden("approving or rejecting a draft needs the approver role")
    if body.decision == "reject" and body.reason is None:
        raise InvalidInput("a rejection needs a reason, so the draft can be revised", code="reason_required")
    handle = await _open_handle(request, engine, principal, task_id)
    policy = await run_in_threadpool(tenant_policy_of, engine, principal.tenant_id)
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
    return DecisionOut(**asdict(result))


async def _control(
    update: Any, task_id: str, body: ControlIn | None, request: Request, principal: PrincipalContext, engine: Engine
) -> TaskView:
    handle = await _open_handle(request, engine, principal, task_id, control=True)
    try:
        state: TaskState = await _update(
            handle, update, ControlRequest(principal.user_id, sorted(principal.roles), body.reason if body else None)
        )
    except Forbidden as exc:
        # Only reachable before the read model has the task: a caller who cannot see it hears a missing task.
        if not may_read_every_task(principal.roles):
            raise NotFound(f"task {task_id} does not exist") from exc
        raise
    return TaskView.from_live(state, None)


@router.post("/tasks/{task_id}/pause", response_model=TaskView, response_model_exclude_unset=True)
async def pause(
    task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep, body: ControlIn | None = None
) -> TaskView:
    """Pause at the next step boundary (the running step finishes first)."""
    return await _control(ReportTaskWorkflow.pause, task_id, body, request, principal, engine)


@router.post("/tasks/{task_id}/resume", response_model=TaskView, response_model_exclude_unset=True)
async def resume(
    task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep, body: ControlIn | None = None
) -> TaskView:
    return await _control(ReportTaskWorkflow.resume, task_id, body, request, principal, engine)


@router.post("/tasks/{task_id}/cancel", response_model=TaskView, response_model_exclude_unset=True)
async def cancel(
    task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep, body: ControlIn | None = None
) -> TaskView:
    """Cancel; answers once the task is CANCELLED. Refused while a publication's outcome is unknown."""
    return await _control(ReportTaskWorkflow.cancel, task_id, body, request, principal, engine)


@router.post("/tasks/{task_id}/operations/{operation_id}/resolve", response_model=OperationOut)
async def resolve(
    task_id: str, operation_id: str, body: ResolveIn, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> OperationOut:
    """An operator's verdict on a side effect whose outcome stayed unknown after reconciliation."""
    if not may_operate(principal.roles):
        raise Forbidden("resolving an operation needs the operator role")
    handle = await _open_handle(request, engine, principal, task_id)
    result = await _update(
        handle,
        ReportTaskWorkflow.resolve_operation,
        ResolveRequest(operation_id, body.outcome, body.note, principal.user_id, sorted(principal.roles)),
    )
    return OperationOut(**asdict(result))


def open_artifact(
    task_id: str, sha256: str, request: Request, principal: PrincipalContext, engine: Engine
) -> tuple[TaskArtifact, Iterator[bytes]]:
    """The artifact's row and its bytes in chunks, if this task in the caller's tenant produced it. The store is
    asked at once: bytes it lacks are a typed error (``artifact_unavailable``), never a cut-off download."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise NotFound(f"artifact {sha256} does not exist in task {task_id}")
    with tenant_session(engine, principal.tenant_id) as session:
        owner = transitions.get_task(session, principal.tenant_id, _task_id(task_id)).owner_user_id
        _readable(principal, owner, task_id)
        artifact = artifacts.get_artifact(session, principal.tenant_id, _task_id(task_id), sha256)
    return artifact, task_store(request.app.state.artifacts).open(sha256)


@router.get("/tasks/{task_id}/artifacts/{sha256}")
def get_artifact(
    task_id: str, sha256: str, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> Response:
    """The artifact's bytes, if this task in the caller's tenant produced them, streamed from the artifact store."""
    artifact, chunks = open_artifact(task_id, sha256, request, principal, engine)
    return StreamingResponse(
        chunks,  # a sync iterator: Starlette pulls each chunk in its threadpool
        media_type=artifact.media_type,
        headers={"Content-Disposition": f'inline; filename="{artifact.name}"', "ETag": f'"{sha256}"',
                 "Content-Length": str(artifact.size_bytes)},
    )


@router.get("/tasks/{task_id}/timeline", response_model=TimelineOut)
async def timeline(task_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep) -> TimelineOut:
    """Attempts, checkpoints, approvals, reminders and operations merged in time order."""
    task_id = _task_id(task_id)

    def read() -> tuple[TaskView, list[dict[str, Any]]]:
        with tenant_session(engine, principal.tenant_id) as session:
            task = transitions.get_task(session, principal.tenant_id, task_id)
            return TaskView.row(task), read_timeline(session, principal.tenant_id, task_id)

    row, entries = await run_in_threadpool(read)
    _readable(principal, row.owner_user_id, task_id)
    client = await get_temporal(request)
    described = await _describe(client.get_workflow_handle(row.workflow_id))
    return TimelineOut(
        task_id=task_id,
        status=row.status,
        state_version=row.state_version,
        workflow_id=row.workflow_id,
        run_id=described.run_id if described is not None else row.run_id,
        workflow_status=described.status.name if described is not None and described.status else None,
        entries=[
            {key: value.isoformat() if hasattr(value, "isoformat") else value for key, value in entry.items()}
            for entry in entries
        ],
    )


@router.post("/report-data/sample", response_model=SampleDataOut)
def seed_sample_data(principal: CurrentPrincipal, engine: EngineDep, body: SampleDataIn | None = None) -> SampleDataOut:
    """Load the deterministic sample sales dataset into the caller's tenant, once (operator role)."""
    if not may_operate(principal.roles):
        raise Forbidden("loading sample sales data needs the operator role")
    body = body or SampleDataIn()
    with tenant_session(engine, principal.tenant_id) as session:
        lines = seed_sales(session, principal.tenant_id, total=body.lines, seed=body.seed)
    return SampleDataOut(tenant_lines=lines)
