"""An approval wait has a deadline and reminders; on the time-skipping test server, days pass in seconds."""

from __future__ import annotations

import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import Engine, text
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.testing import WorkflowEnvironment

from activities.stores import default_destinations
from api.settings import Settings
from api.worker import build_worker
from memory.db import tenant_session
from memory.tasks.keys import task_id_for, workflow_id
from tests.tasks.conftest import Team
from workflows import search_attributes
from workflows.report_task import ApprovalPolicy, ReportTaskInput, ReportTaskWorkflow

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"


async def test_an_unanswered_approval_is_reminded_then_expires(team: Team, engine: Engine, settings: Settings) -> None:
    task_id = task_id_for(team.tenant, "alice", "deadline-drill")
    async with await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(TEST_SERVER)) as env:
        await env.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=env.client.namespace,
                search_attributes={
                    key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for key in search_attributes.ALL
                },
            )
        )
        queue = f"deadline-{uuid.uuid4().hex[:8]}"
        with ThreadPoolExecutor(max_workers=4) as executor:
            worker = build_worker(
                env.client, engine, queue, executor,
                artifacts=settings.artifact_root(engine),
                destinations=default_destinations(engine, settings.artifact_root(engine)),
            )
            async with worker:
                handle = await env.client.start_workflow(
                    ReportTaskWorkflow.run,
                    ReportTaskInput(
                        tenant_id=team.tenant,
                        task_id=task_id,
                        owner_user_id="alice",
                        task_type="monthly-report",
                        goal={"month": "2026-06", "currency": "CNY"},
                        request_intent_id="deadline-drill",
                        approval=ApprovalPolicy(deadline_seconds=2 * 3600, reminder_every_seconds=30 * 60),
                    ),
                    id=workflow_id(team.tenant, task_id),
                    task_queue=queue,
                )
                final = await handle.result()
    assert final.status == "FAILED"
    assert final.error == {"code": "approval_expired", "message": "nobody approved the draft before the deadline"}
    assert final.pending_approval is None
    with tenant_session(engine, team.tenant) as session:
        approval = session.execute(
            text(
                "SELECT status, reminders_sent, deadline_at - requested_at AS wait "
                "FROM task_approvals WHERE task_id = :t"
            ),
            {"t": task_id},
        ).one()
        reminders = session.execute(
            text("SELECT reminder_number FROM task_reminders r JOIN task_approvals a USING (tenant_id, approval_id) "
                 "WHERE a.task_id = :t ORDER BY 1"),
            {"t": task_id},
        ).scalars().all()
        task = session.execute(
            text("SELECT status, error->>'code', waiting_reason FROM tasks WHERE task_id = :t"), {"t": task_id}
        ).one()
        operations = session.execute(
            text("SELECT count(*) FROM task_operations WHERE task_id = :t"), {"t": task_id}
        ).scalar_one()
    assert approval.status == "EXPIRED" and approval.reminders_sent == 3
    assert approval.wait.total_seconds() > 7_000  # the deadline is two (skipped) hours after the request
    assert reminders == [1, 2, 3]
    assert tuple(task) == ("FAILED", "approval_expired", None)
    assert operations == 0
