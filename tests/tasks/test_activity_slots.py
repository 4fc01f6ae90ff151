"""A saturated worker keeps its steps alive: activities beyond its threads wait in Temporal, not in the worker.

Issue 12: 200 concurrent report tasks on one worker finished 194/200, with steps failing on their
heartbeat timeout. The worker accepted up to the SDK's default of 100 activities while its
executor had a few threads; an accepted activity waiting for a thread cannot heartbeat, so its
timeout ran out before it started. ``build_worker`` now accepts only as many activities as the
executor has threads.

Here: one thread, four tasks at once, a load step that takes 1.5 s (heartbeating all along) and a
step heartbeat timeout of 1 s. With the old slots every task but the first has its load step time
out while it waits for the thread; bounded, no step attempt is ever retried.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Engine, text

from activities.tasks.faults import FaultPlan
from api.settings import Settings
from memory.db import tenant_session
from memory.tasks.keys import task_id_for, workflow_id
from tests.conftest import MakeKey
from tests.tasks.conftest import own_worker, report_input, small_tenant
from workflows.report_task import ReportTaskWorkflow

TASKS = 4


async def _run(
    settings: Settings, engine: Engine, make_key: MakeKey, activity_slots: int | None
) -> tuple[list[str], int]:
    """Run TASKS tasks to their approval wait on a one-thread worker: their statuses, and the load-step retries."""
    tenant = small_tenant(make_key, engine)
    ids = [task_id_for(tenant, "alice", f"slots-{n}") for n in range(TASKS)]
    faults = FaultPlan(slow_steps={"load_data": 1.5})
    async with own_worker(settings, engine, threads=1, faults=faults, activity_slots=activity_slots) as (client, queue):
        handles = [
            await client.start_workflow(
                ReportTaskWorkflow.run,
                report_input(tenant, task_id, f"slots-{n}", step_heartbeat_seconds=1.0),
                id=workflow_id(tenant, task_id),
                task_queue=queue,
            )
            for n, task_id in enumerate(ids)
        ]
        deadline = asyncio.get_running_loop().time() + 90
        while asyncio.get_running_loop().time() < deadline:
            with tenant_session(engine, tenant) as session:
                waiting = session.execute(
                    text("SELECT count(*) FROM tasks WHERE status IN ('WAITING_FOR_APPROVAL', 'FAILED')")
                ).scalar_one()
            if waiting == TASKS:
                break
            await asyncio.sleep(0.2)
        for handle in handles:
            await handle.terminate("test over")
    with tenant_session(engine, tenant) as session:
        statuses = session.execute(text("SELECT status FROM tasks")).scalars().all()
        retried = session.execute(
            text("SELECT count(*) FROM task_attempts WHERE step_id = 'load_data' AND temporal_attempt > 1")
        ).scalar_one()
    return sorted(statuses), int(retried)


async def test_bounded_slots_keep_queued_steps_from_timing_out(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    statuses, retried = await _run(settings, engine, make_key, activity_slots=None)
    assert statuses == ["WAITING_FOR_APPROVAL"] * TASKS
    assert retried == 0


async def test_unbounded_slots_time_out_queued_steps(settings: Settings, engine: Engine, make_key: MakeKey) -> None:
    """The control: the SDK's default slots (as before the fix) with the same thread make queued steps time out."""
    with pytest.warns(
        UserWarning, match="max_concurrent_activities is 100 but activity_executor's max_workers is only 1"
    ):
        _statuses, retried = await _run(settings, engine, make_key, activity_slots=100)  # the SDK sees it too
    assert retried > 0
