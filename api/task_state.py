"""The live task state a RESUME_TASK recall reads: the task workflow's ``state`` query, for its owner only.

Read before the bundle's transaction (a Temporal call must not hold a database connection). A task
that cannot be read now is a 503 :class:`memory.recall.service.SourceUnavailable`, never a bundle
without it; another user's task is the same 404 as a missing one.
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import Request
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.service import RPCError, RPCStatusCode

from api.deps import get_temporal
from memory.auth import PrincipalContext
from memory.db import tenant_session
from memory.errors import NotFound
from memory.recall.bundle_types import TaskState
from memory.recall.service import SourceUnavailable
from memory.tasks.keys import workflow_id
from memory.tasks.transitions import task_owner


def read_model_owner(engine: Engine, tenant_id: str, task_id: str) -> str | None:
    """The task's owner in the read model (None: no row yet), checked before any Temporal call."""
    with tenant_session(engine, tenant_id) as session:
        return task_owner(session, tenant_id, task_id)


async def live_task_state(request: Request, principal: PrincipalContext, task_id: str) -> TaskState:
    """The live task from its workflow's query; the caller must own it (else the same 404 as a missing task)."""
    from workflows.report_task import ReportTaskWorkflow

    # The read model first: another user's task is refused without asking Temporal, so it answers
    # like a missing one and no slower (issue 12, finding 11). No row yet: the live state decides below.
    owner = await run_in_threadpool(read_model_owner, request.app.state.engine, principal.tenant_id, task_id)
    if owner is not None and owner != principal.user_id:
        raise NotFound(f"task {task_id} does not exist")
    try:
        client = await get_temporal(request)
        state = await client.get_workflow_handle(workflow_id(principal.tenant_id, task_id)).query(
            ReportTaskWorkflow.state, rpc_timeout=timedelta(seconds=5)
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"task {task_id} does not exist") from exc
        raise SourceUnavailable(f"the task state of {task_id} could not be read: {exc.message}") from exc
    except (OSError, RuntimeError) as exc:
        raise SourceUnavailable(f"the task state of {task_id} could not be read: {exc}") from exc
    if state is None or state.owner_user_id != principal.user_id or state.tenant_id != principal.tenant_id:
        raise NotFound(f"task {task_id} does not exist")
    return TaskState(task_id=state.task_id, status=state.status, current_step_id=state.current_step_id,
                     state_version=state.state_version, waiting_reason=state.waiting_reason)
