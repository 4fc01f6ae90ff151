"""Records ``data-only-v1.json``: a task running a pinned definition (compute → approval → publish; rejected once,
redrafted, approved, published), for ``tests/tasks/test_replay_generic.py``.

Run it on purpose (its name keeps it out of the suite), after a change that is meant to alter the generic path's
commands, and commit the new history together with the ``workflow.patched`` that keeps the old one replaying::

    PYTHONPATH=$PWD .venv/bin/pytest -q -p no:cacheprovider -n 0 tests/tasks/histories/record_generic.py
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from temporalio.client import WorkflowHandle

from activities.tasks.faults import FaultPlan
from api.settings import Settings
from memory.tasks import registry
from memory.tasks.contract import ProducedArtifact, StepContext, StepOutcome
from memory.tasks.keys import workflow_id
from memory.tasks.live import ApprovalDecision, TaskState
from tests.conftest import MakeKey
from tests.tasks.conftest import own_worker
from workflows.report_task import ReportTaskInput, ReportTaskWorkflow

HISTORY = Path(__file__).parent / "data-only-v1.json"
BODY = {
    "version": "data-only-v1",
    "goal_schema": {"type": "object", "properties": {"topic": {"type": "string"}}},
    "steps": [
        {"step_id": "write", "kind": "compute", "function": "data-only.write"},
        {"step_id": "review", "kind": "approval", "artifact_from": "write/digest.md"},
        {"step_id": "send", "kind": "publish", "destination": "reports"},
    ],
    "redraft_step": "write",
}


def write(ctx: StepContext) -> StepOutcome:
    text = f"Digest of {ctx.goal['topic']}, revision {ctx.extra.get('revision', 1)}".encode()
    return StepOutcome({"chars": len(text)}, [ProducedArtifact("digest.md", "draft", "text/markdown", text)])


async def _decide(handle: WorkflowHandle[Any, Any], decision: str) -> None:
    state: TaskState | None = None
    for _ in range(300):
        state = await handle.query(ReportTaskWorkflow.state)
        if state is not None and state.status == "WAITING_FOR_APPROVAL" and state.pending_approval is not None:
            break
        await asyncio.sleep(0.1)
    assert state is not None and state.pending_approval is not None
    await handle.execute_update(ReportTaskWorkflow.decide, ApprovalDecision(
        decision, state.pending_approval.artifact_sha256, state.state_version, "bob", ["approver"],
        "shorter" if decision == "reject" else None))


async def test_record_the_generic_path(settings: Settings, engine: Engine, make_key: MakeKey) -> None:
    registry.declare_function("data-only.write", write)
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    make_key(tenant=tenant, user="bob", roles=("approver",))
    task_id = f"task-{uuid.uuid4().hex[:8]}"
    async with own_worker(settings, engine, threads=2, faults=FaultPlan()) as (client, queue):
        handle = await client.start_workflow(
            ReportTaskWorkflow.run,
            ReportTaskInput(tenant, task_id, "alice", "data-only", {"topic": "June"}, "record", definition=BODY),
            id=workflow_id(tenant, task_id), task_queue=queue,
        )
        await _decide(handle, "reject")
        await _decide(handle, "approve")
        result = await handle.result()
        assert result.status == "SUCCEEDED", result
        HISTORY.write_text((await handle.fetch_history()).to_json())
