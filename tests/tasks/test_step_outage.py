"""An outage is not a failure of the step: a report step waits out an unreachable database.

Issue 12: ``bench/chaos.py`` killed PostgreSQL during a mixed load and one report task of 45
failed. Its step had five attempts 0.5 s apart with backoff, about 8 s in all, and every attempt
met the database still restarting. Now a step's attempts that meet a refused connection are
retried without limit, and only failures of the step itself count towards
``store.STEP_ATTEMPT_LIMIT``, which a bug still reaches.

Each test runs its own worker with a fault plan (a connection to a closed port is the real
error an outage raises) and waits for the task to settle.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import Engine, text

from activities.tasks.faults import FaultPlan
from api.devstack.processes import free_port
from api.settings import Settings
from memory.db import tenant_session
from memory.tasks.keys import task_id_for, workflow_id
from memory.tasks.steps import STEP_ATTEMPT_LIMIT, STORE_OUTAGE
from tests.conftest import MakeKey, s3_settings, start_s3_standin
from tests.tasks.conftest import own_worker, report_input, small_tenant
from workflows.report_task import ReportTaskWorkflow

SETTLED = ("WAITING_FOR_APPROVAL", "FAILED")


async def _settle(settings: Settings, engine: Engine, make_key: MakeKey, faults: FaultPlan) -> dict[str, Any]:
    """Run one task on a worker with ``faults`` until it waits for approval or fails: its row and load_data's
    attempts."""
    tenant = small_tenant(make_key, engine)
    task_id = task_id_for(tenant, "alice", "outage")
    async with own_worker(settings, engine, threads=2, faults=faults) as (client, queue):
        handle = await client.start_workflow(
            ReportTaskWorkflow.run,
            report_input(tenant, task_id, "outage", step_retry_max_interval_seconds=0.5),
            id=workflow_id(tenant, task_id),
            task_queue=queue,
        )
        deadline = asyncio.get_running_loop().time() + 60
        status = None
        while status not in SETTLED and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.2)
            with tenant_session(engine, tenant) as session:
                status = session.execute(text("SELECT status FROM tasks")).scalar_one_or_none()
        if status not in SETTLED:
            await handle.terminate("test over")
    with tenant_session(engine, tenant) as session:
        row = session.execute(text("SELECT status, error FROM tasks")).one()
        attempts = session.execute(
            text(
                "SELECT status, temporal_attempt FROM task_attempts WHERE step_id = 'load_data' ORDER BY attempt_number"
            )
        ).all()
    return {"status": row.status, "error": row.error, "attempts": [(a.status, a.temporal_attempt) for a in attempts]}


async def test_a_step_waits_out_an_unreachable_database(settings: Settings, engine: Engine, make_key: MakeKey) -> None:
    """More refused attempts than the step's attempt limit, and the task still goes on."""
    outage = STEP_ATTEMPT_LIMIT + 3
    run = await _settle(settings, engine, make_key, FaultPlan(unreachable_database={"load_data": outage}))
    assert run["status"] == "WAITING_FOR_APPROVAL", run
    assert run["attempts"] == [("SUCCEEDED", outage + 1)]  # the refused attempts never reached the database


async def test_a_broken_step_still_fails_its_task_after_the_limit(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """The control: a step that fails on its own fails the task after STEP_ATTEMPT_LIMIT attempts, naming only
    the type."""
    run = await _settle(settings, engine, make_key, FaultPlan(broken_steps={"load_data": 99}))
    assert run["status"] == "FAILED", run
    assert run["attempts"] == [("FAILED", n) for n in range(1, STEP_ATTEMPT_LIMIT + 1)]
    assert run["error"]["code"] == "activity_failed"
    assert f"failed {STEP_ATTEMPT_LIMIT} times (RuntimeError)" in run["error"]["message"]
    assert "injected bug" not in run["error"]["message"]


async def test_outage_attempts_do_not_use_up_the_limit(settings: Settings, engine: Engine, make_key: MakeKey) -> None:
    """An outage first, then a bug: the bug still gets its STEP_ATTEMPT_LIMIT attempts."""
    faults = FaultPlan(unreachable_database={"load_data": 3}, broken_steps={"load_data": 3 + STEP_ATTEMPT_LIMIT - 1})
    run = await _settle(settings, engine, make_key, faults)
    assert run["status"] == "WAITING_FOR_APPROVAL", run
    statuses = [status for status, _ in run["attempts"]]
    assert statuses == ["FAILED"] * (STEP_ATTEMPT_LIMIT - 1) + ["SUCCEEDED"]


async def test_a_step_waits_out_an_unreachable_object_store(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """The object store (MNEMO_ARTIFACT_STORE=s3; the moto stand-in of conftest) going down is an outage too: a
    step that cannot store its artifact is retried past the attempt limit, and goes on once the store is back."""
    tenant = small_tenant(make_key, engine)
    task_id = task_id_for(tenant, "alice", "store-outage")
    port = free_port()
    server, location = start_s3_standin(port)
    async with own_worker(s3_settings(settings, location), engine, threads=2, faults=FaultPlan()) as (client, queue):
        server.stop()
        handle = await client.start_workflow(
            ReportTaskWorkflow.run,
            report_input(tenant, task_id, "store-outage", step_retry_max_interval_seconds=0.5),
            id=workflow_id(tenant, task_id),
            task_queue=queue,
        )
        loop = asyncio.get_running_loop()
        deadline, failed, status = loop.time() + 60, 0, None
        while failed <= STEP_ATTEMPT_LIMIT and status != "FAILED" and loop.time() < deadline:
            await asyncio.sleep(0.2)
            with tenant_session(engine, tenant) as session:
                status = session.execute(text("SELECT status FROM tasks")).scalar_one_or_none()
                failed = session.execute(text("SELECT count(*) FROM task_attempts WHERE step_id = 'load_data' "
                                              "AND status = 'FAILED'")).scalar_one()
        server, _ = start_s3_standin(port)  # back, with its bucket
        try:
            while status not in SETTLED and loop.time() < deadline + 30:
                await asyncio.sleep(0.2)
                with tenant_session(engine, tenant) as session:
                    status = session.execute(text("SELECT status FROM tasks")).scalar_one_or_none()
            if status not in SETTLED:
                await handle.terminate("test over")
        finally:
            server.stop()
    with tenant_session(engine, tenant) as session:
        codes = session.execute(text("SELECT status, error->>'code' FROM task_attempts WHERE step_id = 'load_data' "
                                     "ORDER BY attempt_number")).all()
    assert status == "WAITING_FOR_APPROVAL", (status, codes)
    assert len(codes) > STEP_ATTEMPT_LIMIT + 1
    assert [tuple(c) for c in codes] == [("FAILED", STORE_OUTAGE)] * (len(codes) - 1) + [("SUCCEEDED", None)]
