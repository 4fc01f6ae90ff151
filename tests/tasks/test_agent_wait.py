"""How a task waits for an agent, beside the API's signal: its own poll finds a result whose signal was lost, and a
step's ``timeout_seconds`` ends a wait nobody answers."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Engine
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from activities.tasks.faults import FaultPlan
from api.settings import Settings
from memory.db import tenant_session
from memory.tasks import keys, leases
from memory.tasks.live import TaskState
from memory.tasks.ref import TaskRef
from tests.conftest import MakeKey
from tests.tasks.conftest import own_worker
from workflows.report_task import ReportTaskInput, ReportTaskWorkflow


def _body(first: dict[str, Any]) -> dict[str, Any]:
    return {"version": "1", "goal_schema": {"type": "object"}, "redraft_step": "first", "steps": [
        {"step_id": "first", "kind": "agent", **first},
        {"step_id": "second", "kind": "agent"},
        {"step_id": "review", "kind": "approval", "artifact_from": "second/out.txt"},
        {"step_id": "send", "kind": "publish", "destination": "archive"},
    ]}


@asynccontextmanager
async def _started(settings: Settings, engine: Engine, make_key: MakeKey, body: dict[str, Any],
                   **options: Any) -> AsyncIterator[tuple[WorkflowHandle[Any, Any], TaskRef]]:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    ref = TaskRef(tenant, f"task-{uuid.uuid4().hex[:8]}")
    async with own_worker(settings, engine, threads=2, faults=FaultPlan()) as (client, queue):
        handle = await client.start_workflow(
            ReportTaskWorkflow.run,
            ReportTaskInput(tenant, ref.task_id, "alice", "waits", {}, "intent", definition=body, **options),
            id=keys.workflow_id(tenant, ref.task_id), task_queue=queue,
        )
        try:
            yield handle, ref
        finally:
            with contextlib.suppress(RPCError):  # already ended
                await handle.terminate("test over")


async def _state_until(handle: WorkflowHandle[Any, Any], done: Any, seconds: float = 30) -> TaskState:
    for _ in range(int(seconds * 10)):
        state: TaskState | None = await handle.query(ReportTaskWorkflow.state)
        if state is not None and done(state):
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"the task never got there: {state}")


def _waiting_at(step_id: str) -> Any:
    return lambda s: s.current_step_id == step_id and s.waiting_reason == "AGENT"


async def test_a_result_whose_signal_was_lost_is_found_by_the_poll(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """The step is completed through the domain alone (what the API records before it signals), no signal sent:
    the workflow's poll reads it and opens the next step."""
    async with _started(settings, engine, make_key, _body({}), agent_poll_seconds=1.0) as (handle, ref):
        await _state_until(handle, _waiting_at("first"))

        def transaction() -> Any:
            return tenant_session(engine, ref.tenant_id)

        claimed = leases.claim(transaction, ref, step_id=None, lease_seconds=60, actor="alice", worker="test")
        leases.complete(transaction, ref, claimed.attempt.attempt_id, body_digest="d", artifacts=[],
                        output={"found": 3})
        state = await _state_until(handle, _waiting_at("second"), seconds=20)
        assert state.completed_step_ids == ["first"] and state.status == "WAITING_FOR_EXTERNAL"


async def test_a_wait_nobody_answers_ends_at_the_steps_timeout(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    async with _started(settings, engine, make_key, _body({"timeout_seconds": 2})) as (handle, _):
        state: TaskState = await asyncio.wait_for(handle.result(), 30)
    assert state.error is not None
    assert (state.status, state.error["code"]) == ("FAILED", "agent_step_timeout")
    assert "first" in state.error["message"] and "timeout_seconds" in state.error["message"]
