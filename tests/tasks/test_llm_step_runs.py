"""llm steps run by the engine against the labelled stand-in model server (tests/sessions/llm_standin.py): a model
slower than the step's heartbeat timeout is asked once, and a rejection re-runs the step with the reviewer's reason
in its prompt."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Engine, select
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from activities.tasks.faults import FaultPlan
from api.settings import Settings
from memory.db import tenant_session
from memory.llm import LlmConfig
from memory.tasks import keys
from memory.tasks.live import ApprovalDecision, TaskState
from memory.tasks.models import TaskAttempt
from tests.conftest import MakeKey
from tests.sessions.llm_standin import LlmStandIn, Reply, completion, running_standin
from tests.tasks.conftest import own_worker
from workflows.report_task import ReportTaskInput, ReportTaskWorkflow

BODY = {"version": "1", "goal_schema": {"type": "object"}, "redraft_step": "write", "steps": [
    {"step_id": "write", "kind": "llm", "prompt": "Write two lines about {{goal.topic}}"},
    {"step_id": "review", "kind": "approval", "artifact_from": "write/answer.txt"},
    {"step_id": "send", "kind": "publish", "destination": "archive"},
]}


@contextlib.asynccontextmanager
async def _running(settings: Settings, engine: Engine, tenant: str, standin: LlmStandIn,
                   **options: Any) -> AsyncIterator[tuple[WorkflowHandle[Any, Any], str]]:
    task_id = f"task-{uuid.uuid4().hex[:8]}"
    llm = LlmConfig(standin.base_url, "standin-model", "key", timeout_seconds=20.0)
    async with own_worker(settings, engine, threads=4, faults=FaultPlan(), llm=llm) as (client, queue):
        handle = await client.start_workflow(
            ReportTaskWorkflow.run,
            ReportTaskInput(tenant, task_id, "alice", "llm-runs", {"topic": "checkout"}, "intent", definition=BODY,
                            **options),
            id=keys.workflow_id(tenant, task_id), task_queue=queue)
        try:
            yield handle, task_id
        finally:
            with contextlib.suppress(RPCError):
                await handle.terminate("test over")


async def _waiting_for_approval(handle: WorkflowHandle[Any, Any], revision: int) -> TaskState:
    for _ in range(300):
        state: TaskState | None = await handle.query(ReportTaskWorkflow.state)
        if state is not None and (state.status == "FAILED" or (
                state.status == "WAITING_FOR_APPROVAL" and state.draft_revision == revision)):
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"the task never waited for approval: {state}")


def _chats(standin: LlmStandIn) -> list[str]:
    return [str(r.body["messages"][0]["content"]) for r in standin.received if r.path.endswith("/chat/completions")]


async def test_a_model_slower_than_the_heartbeat_timeout_is_asked_once(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """The step heartbeats while it waits for the answer: no second attempt asks the model again meanwhile."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    with running_standin() as standin:
        standin.script(*[Reply(body=completion(f"answer {n}").body, delay_seconds=3.5) for n in range(3)])
        async with _running(settings, engine, tenant, standin, step_heartbeat_seconds=1.2) as (handle, task_id):
            state = await _waiting_for_approval(handle, 1)
        assert state.status == "WAITING_FOR_APPROVAL", state
        assert len(_chats(standin)) == 1
    with tenant_session(engine, tenant) as session:
        attempts = session.execute(select(TaskAttempt.status).where(
            TaskAttempt.tenant_id == tenant, TaskAttempt.task_id == task_id)).scalars().all()
    assert attempts == ["SUCCEEDED"]


async def test_a_rejection_reaches_the_model_with_the_reviewers_reason(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    make_key(tenant=tenant, user="bob", roles=("approver",))
    with running_standin() as standin:
        standin.script(completion("a long first draft"), completion("short"))
        async with _running(settings, engine, tenant, standin) as (handle, _):
            state = await _waiting_for_approval(handle, 1)
            assert state.pending_approval is not None
            await handle.execute_update(ReportTaskWorkflow.decide, ApprovalDecision(
                "reject", state.pending_approval.artifact_sha256, state.state_version, "bob", ["approver"],
                "too long: two lines at most"))
            again = await _waiting_for_approval(handle, 2)
        assert again.status == "WAITING_FOR_APPROVAL" and again.draft_sha256 != state.draft_sha256
        first, second = _chats(standin)
    assert first == "Write two lines about checkout"
    assert second.startswith(first) and "too long: two lines at most" in second
