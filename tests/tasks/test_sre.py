"""What an SRE sees: search attributes to find stuck work, and the live TaskState query."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient

from api.settings import Settings
from api.temporal import connect
from tests.tasks.conftest import Team, start_task, status_is, wait_for
from tests.workers import ThreadWorker
from workflows.report_task import ReportTaskWorkflow


async def _listed(settings: Settings, query: str, *, poll: bool = True) -> list[str]:
    client = await connect(settings)
    found: list[str] = []
    for _ in range(100 if poll else 1):  # visibility is eventually consistent: poll, bounded
        found = [w.id async for w in client.list_workflows(query)]
        if found:
            break
        await asyncio.sleep(0.1)
    return found


def test_search_attributes_find_tasks_waiting_for_approval(
    client: TestClient, task_worker: ThreadWorker, team: Team, settings: Settings
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    waiting = (
        f"MnemoTenant = '{team.tenant}' AND MnemoTaskType = 'monthly-report' "
        "AND MnemoStatus = 'WAITING_FOR_APPROVAL' AND MnemoWaitingReason = 'APPROVAL'"
    )
    assert asyncio.run(_listed(settings, waiting)) == [view["workflow_id"]]
    # Visibility has caught up with this workflow (found above), so one look suffices for a negative.
    running = f"MnemoTenant = '{team.tenant}' AND MnemoStatus = 'RUNNING'"
    assert asyncio.run(_listed(settings, running, poll=False)) == []

    async def live() -> object:
        handle = (await connect(settings)).get_workflow_handle(view["workflow_id"])
        return await handle.query(ReportTaskWorkflow.state)

    state = asyncio.run(live())
    assert state.status == "WAITING_FOR_APPROVAL"  # type: ignore[attr-defined]
    assert state.state_version == view["state_version"]  # type: ignore[attr-defined]
    assert state.pending_approval.artifact_sha256 == view["draft_sha256"]  # type: ignore[attr-defined]
