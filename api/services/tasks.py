"""The Temporal edge of report tasks: the start, describe, the ``state`` query and the Updates, with the one
mapping of an Update's refusal to a :class:`~memory.errors.MnemoError`.

Everything here is a Temporal call on a task's workflow; who may see or act on a task is decided before
(:mod:`api.services.task_reads`, :mod:`api.services.task_actions`) from the read model, and the workflow's
validators decide the rest.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.services.client import ClientSource, TemporalUnavailable
from memory.db import tenant_session
from memory.errors import Conflict, Forbidden, InvalidInput, MnemoError, NotFound
from memory.identity.auth import PrincipalContext
from memory.recall import bundle_types
from memory.recall.service import SourceUnavailable
from memory.tasks.keys import workflow_id
from memory.tasks.live import TaskState
from memory.tasks.resumable import ResumableTask, resumable_tasks
from memory.tasks.transitions import task_owner
from workflows import search_attributes
from workflows.fairness import tenant_priority
from workflows.report_task import ReportTaskInput, ReportTaskWorkflow

QUERY_TIMEOUT = timedelta(seconds=5)


def read_model_owner(engine: Engine, tenant_id: str, task_id: str) -> str | None:
    """The task's owner in the read model (None: no row yet), checked before any Temporal call."""
    with tenant_session(engine, tenant_id) as session:
        return task_owner(session, tenant_id, task_id)


async def start(client: Client, task_queue: str, task: ReportTaskInput) -> WorkflowHandle[Any, Any]:
    """Start the task's workflow; a concurrent first start of the same task raises
    :class:`~temporalio.exceptions.WorkflowAlreadyStartedError` (the caller then answers it as a replay, where a
    different goal is a conflict instead of a silent "created")."""
    return await client.start_workflow(
        ReportTaskWorkflow.run,
        task,
        id=workflow_id(task.tenant_id, task.task_id),
        task_queue=task_queue,
        priority=tenant_priority(task.tenant_id),
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        search_attributes=search_attributes.new_task(task.tenant_id, task.task_type),
    )


async def describe(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription | None:
    """The workflow's description; None if Temporal has no such workflow."""
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise TemporalUnavailable(f"Temporal could not describe {handle.id}: {exc.message}") from exc


async def live_state(handle: WorkflowHandle[Any, Any]) -> TaskState | None:
    """The running workflow's ``state`` query; None when it cannot answer (the read model is shown instead)."""
    try:
        state: TaskState | None = await handle.query(ReportTaskWorkflow.state, rpc_timeout=QUERY_TIMEOUT)
    except RPCError:
        return None
    return state


FORBIDDEN_CODES = frozenset({"forbidden", "separation_of_duties", "knowledge_self_review", "knowledge_agent_review"})
INVALID_CODES = frozenset({"reason_required", "invalid_decision", "invalid_outcome"})


def refusal(exc: WorkflowUpdateFailedError) -> MnemoError:
    """The error of an Update the workflow's validator refused, by the code the validator gave (any workflow's:
    a task's or a knowledge review's)."""
    cause = exc.cause
    if not isinstance(cause, ApplicationError):
        return Conflict(f"the task refused the request: {cause}")
    code, message = cause.type or "refused", cause.message
    if code in FORBIDDEN_CODES:
        return Forbidden(message, code=code)
    if code in INVALID_CODES:
        return InvalidInput(message, code=code)
    return Conflict(message, code=code)


async def update(handle: WorkflowHandle[Any, Any], update: Any, arg: Any, closed: MnemoError | None = None) -> Any:
    """Run an Update to completion; a refusal is its typed error, a closed workflow ``closed`` (by default a 409
    ``task_closed``)."""
    try:
        return await handle.execute_update(update, arg)
    except WorkflowUpdateFailedError as exc:
        raise refusal(exc) from exc
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise (closed or Conflict("the task has already ended", code="task_closed")) from exc
        raise TemporalUnavailable(f"Temporal refused the update: {exc.message}") from exc


async def live_task_state(
    engine: Engine, temporal: ClientSource, principal: PrincipalContext, task_id: str
) -> bundle_types.TaskState:
    """The live task a RESUME_TASK recall reads, for its owner only (else the same 404 as a missing task).

    Read before the bundle's transaction (a Temporal call must not hold a database connection). A task that
    cannot be read now is a 503 :class:`~memory.recall.service.SourceUnavailable`, never a bundle without it.
    """
    # The read model first: another user's task is refused without asking Temporal, so it answers
    # like a missing one and no slower (issue 12, finding 11). No row yet: the live state decides below.
    owner = await run_in_threadpool(read_model_owner, engine, principal.tenant_id, task_id)
    if owner is not None and owner != principal.user_id:
        raise NotFound(f"task {task_id} does not exist")
    try:
        client = await temporal()
        state = await client.get_workflow_handle(workflow_id(principal.tenant_id, task_id)).query(
            ReportTaskWorkflow.state, rpc_timeout=QUERY_TIMEOUT
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"task {task_id} does not exist") from exc
        raise SourceUnavailable(f"the task state of {task_id} could not be read: {exc.message}") from exc
    except (OSError, RuntimeError) as exc:
        raise SourceUnavailable(f"the task state of {task_id} could not be read: {exc}") from exc
    if state is None or state.owner_user_id != principal.user_id or state.tenant_id != principal.tenant_id:
        raise NotFound(f"task {task_id} does not exist")
    return bundle_types.TaskState(
        task_id=state.task_id, status=state.status, current_step_id=state.current_step_id,
        state_version=state.state_version, waiting_reason=state.waiting_reason,
        published=any(op.kind == "publish" and op.status == "SUCCEEDED" for op in state.operations),
    )


def resumable(engine: Engine, principal: PrincipalContext, limit: int) -> list[ResumableTask]:
    """The caller's own non-terminal tasks in the read model, most recently changed first."""
    with tenant_session(engine, principal.tenant_id) as session:
        return resumable_tasks(session, principal.tenant_id, principal.user_id, limit)


async def resumable_task_state(
    engine: Engine, temporal: ClientSource, principal: PrincipalContext, limit: int
) -> bundle_types.TaskFound:
    """A RESUME_TASK recall that names no task (seed 003 §14.2): the caller's resumable tasks, and the live state
    of the only one. Of several none is chosen: which one the user means is theirs to say, not a guess."""
    tasks = tuple(await run_in_threadpool(resumable, engine, principal, limit))
    state = await live_task_state(engine, temporal, principal, tasks[0].task_id) if len(tasks) == 1 else None
    return bundle_types.TaskFound(state, tasks)
