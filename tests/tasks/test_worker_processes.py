"""``mnemo worker --processes 2`` against the real Temporal dev server: both processes take report steps, a child
killed mid-step is started again and its step retried on a live one (every task succeeds, published once), and
SIGTERM stops every process with exit 0."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError

from api.devstack.processes import children as children_of
from api.devstack.processes import pid_alive
from api.settings import Settings
from bench.tasks_throughput import pollers
from memory.db import tenant_session
from memory.tasks.keys import task_id_for, workflow_id
from memory.tasks.live import ApprovalDecision
from tests.conftest import MakeKey
from tests.tasks.conftest import report_input, small_tenant
from tests.workers import worker_env
from workflows.report_task import ReportTaskWorkflow

TASKS = 4


async def _step_holder(handle: WorkflowHandle[Any, Any]) -> int | None:
    """The pid of the worker process running one of the task's steps now (the SDK's identity is ``pid@host``)."""
    for pending in (await handle.describe()).raw_description.pending_activities:
        if (pending.activity_type.name == "task_run_step" and pending.last_worker_identity
                and pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED):
            return int(pending.last_worker_identity.split("@", 1)[0])
    return None


async def _approve_all(engine: Engine, tenant: str, client: Client, ids: list[str]) -> None:
    """Approve each task once it waits for approval (the engine's own update, as the API sends it)."""
    pending, refused = set(ids), None
    deadline = asyncio.get_running_loop().time() + 120
    while pending:
        assert asyncio.get_running_loop().time() < deadline, (pending, refused)
        with tenant_session(engine, tenant) as session:
            rows = session.execute(text(
                "SELECT task_id, state_version, draft_sha256 FROM tasks WHERE status = 'WAITING_FOR_APPROVAL'"
            )).all()
        for task_id, version, sha in rows:
            if task_id in pending:
                try:
                    await client.get_workflow_handle(workflow_id(tenant, task_id)).execute_update(
                        ReportTaskWorkflow.decide, ApprovalDecision("approve", sha, version, "bob", ["approver"]))
                except WorkflowUpdateFailedError as exc:  # the read model is a moment ahead of the workflow
                    refused = exc.cause
                    continue
                pending.discard(task_id)
        await asyncio.sleep(0.2)


async def test_two_worker_processes_share_the_queue_and_a_killed_one_loses_no_task(
    settings: Settings, engine: Engine, make_key: MakeKey, tmp_path: Path
) -> None:
    queue = f"procs-{uuid.uuid4().hex[:8]}"
    env = worker_env(settings.model_copy(update={"task_queue": queue}), MNEMO_DATA_DIR=str(settings.data_dir),
                     MNEMO_TASK_SLOW_STEPS="generate_charts=3", MNEMO_CPU_POOL_WORKERS="1")
    said = tmp_path / "worker.out"
    with said.open("w") as sink:
        parent = subprocess.Popen([sys.executable, "-m", "api.cli", "worker", "--processes", "2"], env=env,
                                  stdout=sink, stderr=subprocess.STDOUT)
    tenant = small_tenant(make_key, engine)
    make_key(tenant=tenant, user="bob", roles=("approver",))  # publishing checks the approver's role again
    ids = [task_id_for(tenant, "alice", f"procs-{n}") for n in range(TASKS)]
    try:
        children = set(children_of(parent.pid))
        for _ in range(600):  # the command starts in seconds (its imports), more on a busy machine
            if len(children) == 2:
                break
            assert parent.poll() is None, said.read_text()
            await asyncio.sleep(0.1)
            children = set(children_of(parent.pid))
        assert len(children) == 2, children
        client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
        for _ in range(300):  # both poll the one queue once started (a start imports the project: seconds)
            if await pollers(client, queue) == children:
                break
            await asyncio.sleep(0.2)
        assert await pollers(client, queue) == children
        handles = [
            await client.start_workflow(ReportTaskWorkflow.run,
                                        report_input(tenant, task_id, f"procs-{n}", step_heartbeat_seconds=2.0),
                                        id=workflow_id(tenant, task_id), task_queue=queue)
            for n, task_id in enumerate(ids)
        ]
        victim = None
        while victim is None:  # the chart step stalls 3 s once its attempt is recorded: kill the process running it
            assert parent.poll() is None
            with tenant_session(engine, tenant) as session:
                charting = session.execute(text(
                    "SELECT task_id FROM task_attempts WHERE step_id = 'generate_charts' AND status = 'RUNNING'"
                )).scalars().all()
            for task_id in charting:
                victim = victim or await _step_holder(client.get_workflow_handle(workflow_id(tenant, task_id)))
            await asyncio.sleep(0.1)
        assert victim in children
        os.kill(victim, signal.SIGKILL)
        await _approve_all(engine, tenant, client, ids)
        results = [await asyncio.wait_for(handle.result(), 120) for handle in handles]
        assert [r.status for r in results] == ["SUCCEEDED"] * TASKS, [r.error for r in results]
        now = set(children_of(parent.pid))
        assert len(now) == 2 and victim not in now  # the killed one was started again
        with tenant_session(engine, tenant) as session:
            published = session.execute(text(
                "SELECT count(*), count(DISTINCT task_id) FROM task_operations WHERE status = 'SUCCEEDED'"
            )).one()
            attempts = session.execute(text(
                "SELECT step_id, status, temporal_attempt, worker FROM task_attempts ORDER BY started_at"
            )).all()
        abandoned = [a.step_id for a in attempts if a.status == "ABANDONED"]
        assert tuple(published) == (TASKS, TASKS)  # one publication per task, none twice
        assert "generate_charts" in abandoned, (victim, attempts)  # the killed process's step, retried elsewhere
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(60) == 0
        assert not any(pid_alive(pid) for pid in now), now
    finally:
        if parent.poll() is None:
            parent.kill()
    out = said.read_text()
    assert "mnemo worker: 2 worker processes" in out, out
    assert "crashed" in out and "running again" in out, out
    assert "mnemo worker: stopped" in out, out
