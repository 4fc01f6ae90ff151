"""One tenant's flood of workflows does not queue another tenant's behind it (issue 23, finding 7).

300 deletion requests of one tenant took another's session commit from 0.8 s to 44.8 s: mnemo's task queue
was FIFO. Every workflow now starts with its tenant as Temporal's fairness key (:mod:`workflows.fairness`) on
a server with ``matching.enableFairness`` (the dev stack's, which these tests run). The first test starts a
backlog of one tenant's workflows and then one of another's on a real dev server, serves them with a worker
that runs one task at a time, and compares where the second tenant's workflow finishes with and without keys;
the second checks that mnemo's own starts carry the key.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from fastapi.testclient import TestClient
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import Priority
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from api.settings import Settings
from memory.deletion.jobs import workflow_id as deletion_workflow_id
from tests.conftest import MakeKey, auth
from workflows.fairness import tenant_priority

FLOOD = 12


SERVED: list[str] = []
"""The tenants of the probe steps in the order the worker ran them (one at a time: one activity slot)."""


@activity.defn(name="fairness_probe_step")
async def step(tenant: str) -> str:
    SERVED.append(tenant)
    await asyncio.sleep(0.05)
    return tenant


@workflow.defn(name="FairnessProbe", sandboxed=False)
class Probe:
    @workflow.run
    async def run(self, tenant: str) -> str:
        return str(await workflow.execute_activity(step, tenant, start_to_close_timeout=timedelta(seconds=30)))


async def _service_order(client: Client, keyed: bool) -> list[str]:
    """The tenants of the workflows' steps in the order the queue handed them to the worker: FLOOD of tenant "a"
    were started, then one of "b". Recorded by the step itself, as it starts, on a worker with one activity slot:
    the queue's own order (the workflows' close times raced with their last workflow tasks under load)."""
    queue = f"fairness-{uuid.uuid4().hex[:8]}"
    handles = []
    for n, tenant in enumerate(["a"] * FLOOD + ["b"]):
        priority = tenant_priority(tenant) if keyed else Priority.default
        handles.append(await client.start_workflow(Probe.run, tenant, id=f"{queue}-{n}", task_queue=queue,
                                                   priority=priority))
    SERVED.clear()
    async with Worker(client, task_queue=queue, workflows=[Probe], activities=[step], max_concurrent_activities=1,
                      max_concurrent_workflow_tasks=1, workflow_runner=UnsandboxedWorkflowRunner()):
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    return list(SERVED)


def test_a_tenants_backlog_does_not_hold_another_tenants_workflow_behind_it(settings: Settings) -> None:
    async def both() -> tuple[list[str], list[str]]:
        client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
        return await _service_order(client, keyed=False), await _service_order(client, keyed=True)

    fifo, fair = asyncio.run(both())
    assert fifo.index("b") == FLOOD, fifo  # without keys: behind the whole backlog
    assert fair.index("b") <= 2, fair  # with keys: served in turn, after a task or two of the flood


def test_mnemos_workflows_start_under_their_tenants_fairness_key(
    client: TestClient, make_key: MakeKey, settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    client.post("/sessions", json={"session_id": session_id}, headers=auth(key))
    message = {"idempotency_key": "f1", "role": "user", "content": "我住在杭州", "created_at": "2026-07-01T10:00:00Z"}
    assert client.post(f"/sessions/{session_id}/messages", json={"messages": [message]},
                       headers=auth(key)).status_code == 201
    accepted = client.post(f"/sessions/{session_id}/commit", json={"commit_id": "c1"}, headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    deletion = client.post("/deletion-requests", json={"deletion_request_id": "d1",
                                                       "scope": {"type": "session", "session_id": session_id}},
                           headers=auth(make_key(tenant=tenant, roles=("admin",))))
    assert deletion.status_code == 202, deletion.text

    async def keys() -> list[str]:
        temporal = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
        ids = [accepted.json()["workflow_id"], deletion_workflow_id(tenant, "alice", "d1")]
        described = [await temporal.get_workflow_handle(i).describe() for i in ids]
        return [d.raw_description.workflow_execution_info.priority.fairness_key for d in described]

    assert asyncio.run(keys()) == [tenant, tenant]
