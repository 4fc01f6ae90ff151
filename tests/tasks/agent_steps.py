"""Tasks that wait for an agent, for the agent protocol's tests (REST and MCP).

Until the generic workflow runs ``agent`` steps, a task is put where that workflow will put it by the same
functions: ``POST /tasks`` starts a real workflow on a task queue no worker polls (so it waits, and receives the
API's signal), the read model's row is inserted by :func:`memory.tasks.transitions.insert_task` (what the
``task_create`` activity runs), moved to RUNNING, and the step opened by
:func:`memory.tasks.leases.open_agent_step` (what the agent step's activity runs).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.tasks import keys, leases
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus
from memory.tasks.transitions import NewTask, Transition, get_task, insert_task, move
from tests.tasks.conftest import start_task

STEP = "draft"
NEXT = "review"


@contextmanager
def idle_api(settings: Settings) -> Iterator[TestClient]:
    """The API on a task queue of its own that no worker polls: the workflows it starts wait."""
    idle = settings.model_copy(update={"task_queue": f"agents-{uuid.uuid4().hex[:8]}"})
    with TestClient(create_app(idle)) as client:
        yield client


@dataclass(frozen=True)
class Waiting:
    ref: TaskRef
    workflow_id: str
    state_version: int


def running_task(api: TestClient, engine: Engine, key: str, tenant: str, user: str = "alice") -> Waiting:
    """A task (its workflow started and waiting) whose read model is RUNNING at the agent step."""
    intent = f"intent-{uuid.uuid4().hex[:8]}"
    created = start_task(api, key, intent)
    ref = TaskRef(tenant, created["task_id"])
    with tenant_session(engine, tenant) as session:
        insert_task(session, NewTask(
            ref=ref, owner_user_id=user, task_type="monthly-report", goal={"month": "2026-06", "currency": "CNY"},
            request_intent_id=intent, create_key=keys.create_key(tenant, user, intent), destination="reports",
            workflow_id=created["workflow_id"], run_id=None, workflow_version="monthly-report-v1",
            transition_id=f"create:{ref.task_id}",
        ))
        moved = move(session, ref, Transition(1, f"{ref.task_id}:start", TaskStatus.RUNNING, current_step_id=STEP))
    return Waiting(ref, created["workflow_id"], moved.state_version)


def open_step(engine: Engine, task: Waiting, input_version: str = "1", extra: dict[str, Any] | None = None) -> int:
    """Open the agent step as the workflow does; the task's new state_version."""
    with tenant_session(engine, task.ref.tenant_id) as session:
        version = get_task(session, task.ref.tenant_id, task.ref.task_id).state_version
        return leases.open_agent_step(session, task.ref, step_id=STEP, input_version=input_version,
                                      extra=extra or {}, expected_version=version).state_version


def waiting_task(api: TestClient, engine: Engine, key: str, tenant: str, user: str = "alice",
                 extra: dict[str, Any] | None = None) -> Waiting:
    """A task waiting for an agent to perform its step ``draft``."""
    task = running_task(api, engine, key, tenant, user)
    return Waiting(task.ref, task.workflow_id, open_step(engine, task, extra=extra))


def collect(engine: Engine, task: Waiting, input_version: str = "1", version: int | None = None) -> leases.AgentOutcome:
    """What the workflow collects, at the state_version it knows (by default where opening the step left it)."""
    with tenant_session(engine, task.ref.tenant_id) as session:
        return leases.collect_agent_step(session, task.ref, step_id=STEP, input_version=input_version,
                                         next_step_id=NEXT, expected_version=version or task.state_version)
