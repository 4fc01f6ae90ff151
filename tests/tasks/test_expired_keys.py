"""Publishing re-checks credentials: an expired key is no active credential, like a revoked one."""

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import Engine, update

from memory.db import global_session
from memory.models import ApiKey
from tests.tasks.conftest import Team, approve, start_task, status_is, wait_for
from tests.workers import ThreadWorker


def test_a_report_whose_owner_key_expired_before_approval_is_not_published(
    client: TestClient, task_worker: ThreadWorker, team: Team, engine: Engine
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    with global_session(engine) as session:
        session.execute(
            update(ApiKey).where(ApiKey.key_id == team.owner.split("_")[1])
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    approved = approve(client, team.approver, view)
    assert approved.status_code == 200, approved.text
    closed = wait_for(client, team.approver, task_id, lambda v: v["status"] not in ("RUNNING", "WAITING_FOR_APPROVAL"))
    assert closed["publications"] == [], closed
    assert closed["status"] != "SUCCEEDED", closed
    assert "no active credential" in str(closed), closed
