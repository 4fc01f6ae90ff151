"""Records ``agent-v1.json``: a task whose draft an agent performs (agent → approval → publish; rejected once, the
agent redrafts with the reason, approved, published), for ``tests/tasks/test_replay_generic.py``.

The agent's calls are the API's (:mod:`memory.tasks.leases`, then the ``agent_step_settled`` signal). Run it on
purpose (its name keeps it out of the suite), after a change meant to alter the agent path's commands, and commit
the new history with the ``workflow.patched`` that keeps the old one replaying::

    PYTHONPATH=$PWD .venv/bin/pytest -q -p no:cacheprovider -n 0 tests/tasks/histories/record_agent.py
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from temporalio.client import WorkflowHandle

from activities.tasks.faults import FaultPlan
from api.settings import Settings
from memory.db import tenant_session
from memory.tasks import leases
from memory.tasks.artifacts import ArtifactMeta, task_store
from memory.tasks.keys import workflow_id
from memory.tasks.live import TaskState
from memory.tasks.ref import TaskRef
from tests.conftest import MakeKey
from tests.tasks.conftest import own_worker
from tests.tasks.histories.record_generic import _decide
from workflows.report_task import ReportTaskInput, ReportTaskWorkflow

HISTORY = Path(__file__).parent / "agent-v1.json"
BODY = {
    "version": "agent-v1",
    "goal_schema": {"type": "object", "properties": {"topic": {"type": "string"}}},
    "steps": [
        {"step_id": "write", "kind": "agent", "description": "write the digest"},
        {"step_id": "review", "kind": "approval", "artifact_from": "write/digest.md"},
        {"step_id": "send", "kind": "publish", "destination": "reports"},
    ],
    "redraft_step": "write",
}


async def _perform(settings: Settings, engine: Engine, handle: WorkflowHandle[Any, Any], ref: TaskRef,
                   revision: int) -> None:
    """The agent's turn, as the API does it: claim, store the bytes, complete, signal."""
    for _ in range(300):
        state: TaskState | None = await handle.query(ReportTaskWorkflow.state)
        if state is not None and state.waiting_reason == "AGENT":
            break
        await asyncio.sleep(0.1)

    def transaction() -> Any:
        return tenant_session(engine, ref.tenant_id)

    claimed = leases.claim(transaction, ref, step_id=None, lease_seconds=60, actor="alice", worker="recorder")
    content = f"Digest, revision {revision}".encode()
    task_store(settings.artifact_root(engine)).put(content)
    meta = ArtifactMeta(hashlib.sha256(content).hexdigest(), "digest.md", "agent", "text/markdown", len(content))
    done = leases.complete(transaction, ref, claimed.attempt.attempt_id, body_digest=f"r{revision}",
                           artifacts=[meta], output={"revision": revision})
    await handle.signal(leases.SETTLED_SIGNAL, {"step_id": done.step_id, "input_version": done.input_version})


async def test_record_the_agent_path(settings: Settings, engine: Engine, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    make_key(tenant=tenant, user="bob", roles=("approver",))
    ref = TaskRef(tenant, f"task-{uuid.uuid4().hex[:8]}")
    async with own_worker(settings, engine, threads=2, faults=FaultPlan()) as (client, queue):
        handle = await client.start_workflow(
            ReportTaskWorkflow.run,
            ReportTaskInput(tenant, ref.task_id, "alice", "agent-digest", {"topic": "June"}, "record",
                            definition=BODY),
            id=workflow_id(tenant, ref.task_id), task_queue=queue,
        )
        await _perform(settings, engine, handle, ref, 1)
        await _decide(handle, "reject")
        await _perform(settings, engine, handle, ref, 2)
        await _decide(handle, "approve")
        result = await handle.result()
        assert result.status == "SUCCEEDED", result
        HISTORY.write_text((await handle.fetch_history()).to_json())
