"""Tasks that wait for an agent, for the agent protocol's tests (REST and MCP).

The protocol is tested apart from the engine (whose side is tests/tasks/test_agent_steps_run.py and
test_agent_wait.py): a task is put where the engine puts it, by the same functions. Its workflow is started as
``POST /tasks`` starts it (:func:`api.services.tasks.start`), on a task queue no worker polls (so it waits, and
receives the API's signal); the read model's row is inserted by :func:`memory.tasks.transitions.insert_task` (what
the ``task_create`` activity runs), moved to RUNNING, and the step opened by
:func:`memory.tasks.leases.open_agent_step` (what the agent step's activity runs).
"""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from api.services.tasks import start
from api.settings import Settings
from api.temporal import connect
from memory.db import tenant_session
from memory.tasks import keys, leases
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus
from memory.tasks.transitions import NewTask, Transition, get_task, insert_task, move
from tests.tasks.conftest import report_input

STEP = "draft"
NEXT = "review"


@dataclass(frozen=True)
class Waiting:
    ref: TaskRef
    workflow_id: str
    state_version: int


def running_task(settings: Settings, engine: Engine, tenant: str) -> Waiting:
    """Alice's task (its workflow started and waiting) whose read model is RUNNING at the agent step."""
    intent = f"intent-{uuid.uuid4().hex[:8]}"
    task = report_input(tenant, keys.task_id_for(tenant, "alice", intent), intent)

    async def started() -> None:
        await start(await connect(settings), f"nobody-{uuid.uuid4().hex[:8]}", task)

    with ThreadPoolExecutor(max_workers=1) as thread:  # the MCP tests call this from their own event loop
        thread.submit(asyncio.run, started()).result()
    return recorded_task(engine, tenant, intent)


def recorded_task(engine: Engine, tenant: str, intent: str) -> Waiting:
    """Alice's task of ``intent`` in the read model (as the task_create activity records it), RUNNING at the
    agent step."""
    ref = TaskRef(tenant, keys.task_id_for(tenant, "alice", intent))
    with tenant_session(engine, tenant) as session:
        insert_task(session, NewTask(
            ref=ref, owner_user_id="alice", task_type="monthly-report", goal={"month": "2026-06", "currency": "CNY"},
            request_intent_id=intent, create_key=keys.create_key(tenant, "alice", intent), destination="reports",
            workflow_id=ref.workflow_id, run_id=None, workflow_version="monthly-report-v1",
            transition_id=f"create:{ref.task_id}",
        ))
        moved = move(session, ref, Transition(1, f"{ref.task_id}:start", TaskStatus.RUNNING, current_step_id=STEP))
    return Waiting(ref, ref.workflow_id, moved.state_version)


def open_step(engine: Engine, task: Waiting, input_version: str = "1", extra: dict[str, Any] | None = None) -> int:
    """Open the agent step as the workflow does; the task's new state_version."""
    with tenant_session(engine, task.ref.tenant_id) as session:
        version = get_task(session, task.ref.tenant_id, task.ref.task_id).state_version
        return leases.open_agent_step(session, task.ref, step_id=STEP, input_version=input_version,
                                      extra=extra or {}, expected_version=version).state_version


def waiting_task(settings: Settings, engine: Engine, tenant: str, extra: dict[str, Any] | None = None) -> Waiting:
    """Alice's task waiting for an agent to perform its step ``draft``."""
    task = running_task(settings, engine, tenant)
    return Waiting(task.ref, task.workflow_id, open_step(engine, task, extra=extra))


def collect(engine: Engine, task: Waiting, input_version: str = "1", version: int | None = None) -> leases.AgentOutcome:
    """What the workflow collects, at the state_version it knows (by default where opening the step left it)."""
    with tenant_session(engine, task.ref.tenant_id) as session:
        return leases.collect_agent_step(session, task.ref, step_id=STEP, input_version=input_version,
                                         next_step_id=NEXT, expected_version=version or task.state_version)
