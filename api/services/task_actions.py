"""Acting on a report task: create it, decide its draft, pause, resume or cancel it, resolve an operation.
What the ``/tasks`` endpoints and the console's forms share.

Each action passes the read-model gate (:func:`api.services.task_reads.gate`) before it reaches Temporal,
then runs an Update whose validator (``memory.tasks``) has the last word.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.client import WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError

from api.schemas.tasks import (
    ControlIn,
    DecisionIn,
    DecisionOut,
    OperationOut,
    ResolveIn,
    TaskCreatedOut,
    TaskCreateIn,
    TaskView,
)
from api.services import tasks
from api.services.client import ClientSource
from api.services.task_reads import RUNNING, gate, read_task, task_id_of, task_view, tenant_policy_of
from memory.db import tenant_session
from memory.errors import Conflict, Forbidden, IdempotencyConflict, NotFound
from memory.identity.auth import PrincipalContext, may_operate, may_read_every_task
from memory.tasks import keys
from memory.tasks.approvals import check_request
from memory.tasks.definitions import Definition
from memory.tasks.goals import check_goal
from memory.tasks.live import ApprovalDecision, ControlRequest, ResolveRequest, TaskState
from memory.tasks.resolve import resolve_definition
from workflows.report_task import ApprovalPolicy, ReportTaskInput, ReportTaskWorkflow

Control = Literal["pause", "resume", "cancel"]
_CONTROLS = {"pause": ReportTaskWorkflow.pause, "resume": ReportTaskWorkflow.resume,
             "cancel": ReportTaskWorkflow.cancel}


async def open_handle(
    temporal: ClientSource, engine: Engine, principal: PrincipalContext, task_id: str, *, control: bool = False
) -> WorkflowHandle[Any, Any]:
    """The running workflow of a task the caller may act on; a closed task is a 409 ``task_closed``."""
    task_id = task_id_of(task_id)
    await gate(engine, principal, task_id, control=control)
    client = await temporal()
    handle = client.get_workflow_handle(keys.workflow_id(principal.tenant_id, task_id))
    described = await tasks.describe(handle)
    if described is None:
        raise NotFound(f"task {task_id} does not exist")
    if described.status != RUNNING:
        view = await run_in_threadpool(read_task, engine, principal.tenant_id, task_id)
        raise Conflict(f"the task has already ended ({view.status})", code="task_closed")
    return handle


def definition_for(engine: Engine, tenant_id: str, task_type: str) -> Definition:
    """The definition a new task of the type pins now (:func:`memory.tasks.resolve.resolve_definition`)."""
    with tenant_session(engine, tenant_id) as session:
        return resolve_definition(session, tenant_id, task_type)


async def create_task(
    temporal: ClientSource, engine: Engine, task_queue: str, principal: PrincipalContext, body: TaskCreateIn
) -> TaskCreatedOut:
    """Start a task of a registered type, pinning its current definition (a running task keeps it). The same
    (user, request_intent_id) always names the same task: a replay answers it (``replayed``), and a replay with
    another type or goal is a 409. An unknown type or a goal its schema refuses: :class:`InvalidInput`."""
    definition = await run_in_threadpool(definition_for, engine, principal.tenant_id, body.task_type)
    check_goal(definition, body.goal)
    goal = body.goal
    task_id = keys.task_id_for(principal.tenant_id, principal.user_id, body.request_intent_id)
    workflow_id = keys.workflow_id(principal.tenant_id, task_id)
    client = await temporal()
    if await tasks.describe(client.get_workflow_handle(workflow_id)) is None:
        task = ReportTaskInput(
            tenant_id=principal.tenant_id, task_id=task_id, owner_user_id=principal.user_id,
            task_type=body.task_type, goal=goal, request_intent_id=body.request_intent_id,
            destination=body.destination,
            approval=ApprovalPolicy(body.approval_deadline_seconds, body.approval_reminder_seconds),
            definition=dict(definition.body),
        )
        try:
            await tasks.start(client, task_queue, task)
            view = await task_view(temporal, engine, principal, task_id)
            return TaskCreatedOut(
                task_id=task_id, status=view.status, state_version=view.state_version, workflow_id=workflow_id,
                replayed=False,
            )
        except WorkflowAlreadyStartedError:  # a concurrent first start won: answered as a replay
            pass
    view = await task_view(temporal, engine, principal, task_id)
    if "goal" in view.model_fields_set and (view.goal != goal or view.task_type != body.task_type):
        raise IdempotencyConflict(
            f"request_intent_id {body.request_intent_id!r} already started task {task_id} with another goal; "
            "use a new request_intent_id for a new task",
            details={"task_id": task_id},
        )
    return TaskCreatedOut(
        task_id=task_id, status=view.status, state_version=view.state_version, workflow_id=workflow_id, replayed=True
    )


async def decide(
    temporal: ClientSource, engine: Engine, principal: PrincipalContext, task_id: str, body: DecisionIn
) -> DecisionOut:
    """Approve or reject the current draft, bound to its sha256 and the task's state_version."""
    check_request(principal.roles, body.decision, body.reason)
    handle = await open_handle(temporal, engine, principal, task_id)
    policy = await run_in_threadpool(tenant_policy_of, engine, principal.tenant_id)
    result = await tasks.update(
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


async def control(
    temporal: ClientSource, engine: Engine, principal: PrincipalContext, task_id: str, action: Control,
    body: ControlIn | None,
) -> TaskView:
    """Pause (at the next step boundary), resume or cancel; the owner, operators and admins may."""
    handle = await open_handle(temporal, engine, principal, task_id, control=True)
    try:
        state: TaskState = await tasks.update(
            handle, _CONTROLS[action],
            ControlRequest(principal.user_id, sorted(principal.roles), body.reason if body else None),
        )
    except Forbidden as exc:
        # Only reachable before the read model has the task: a caller who cannot see it hears a missing task.
        if not may_read_every_task(principal.roles):
            raise NotFound(f"task {task_id} does not exist") from exc
        raise
    return TaskView.from_live(state, None)


async def resolve(
    temporal: ClientSource, engine: Engine, principal: PrincipalContext, task_id: str, operation_id: str,
    body: ResolveIn,
) -> OperationOut:
    """An operator's verdict on a side effect whose outcome stayed unknown after reconciliation."""
    if not may_operate(principal.roles):
        raise Forbidden("resolving an operation needs the operator role")
    handle = await open_handle(temporal, engine, principal, task_id)
    result = await tasks.update(
        handle,
        ReportTaskWorkflow.resolve_operation,
        ResolveRequest(operation_id, body.outcome, body.note, principal.user_id, sorted(principal.roles)),
    )
    return OperationOut(**asdict(result))
