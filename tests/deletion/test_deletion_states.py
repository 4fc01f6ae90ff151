"""The deletion status machine under faults and holds (faults are injected into the real worker)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from activities.deletion import FaultPlan
from memory.db import tenant_session
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate


def _statuses(engine: Engine, tenant: str, job_id: str) -> list[str]:
    with tenant_session(engine, tenant) as session:
        return list(
            session.execute(
                text("SELECT action FROM audit_log WHERE job_id = :job ORDER BY audit_id"), {"job": job_id}
            ).scalars()
        )


def _delete_one(api: TestClient, key: str, content: str) -> str:
    target = api.post("/memory-candidates", json=candidate(content), headers=auth(key)).json()["memory_id"]
    response = api.delete(f"/memories/{target}", headers=auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


def test_a_transient_failure_waits_in_retry_wait_then_completes(
    api: TestClient, make_key: MakeKey, engine: Engine, faults: FaultPlan
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    faults.fail["search_projection"] = 3  # one whole round of activity attempts fails
    try:
        job = _delete_one(api, key, "暂时失败的删除")
        body = wait_for(api, key, job, completed)
    finally:
        faults.fail.clear()
    assert body["fully_deleted"] is True
    assert _statuses(engine, tenant, job) == [
        "DELETION_REQUESTED",
        "DELETION_RUNNING",
        "DELETION_RETRY_WAIT",
        "DELETION_RUNNING",
        "DELETION_COMPLETED",
    ]


def test_failed_requires_action_never_reports_deletion_and_resumes_from_its_checkpoint(
    api: TestClient, make_key: MakeKey, engine: Engine, faults: FaultPlan
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    operator = make_key(tenant=tenant, user="sre", roles=("operator",))
    faults.permanent.add("audit_bodies")
    try:
        job = _delete_one(api, key, "需要人工处理的删除")
        stuck = wait_for(api, key, job, lambda b: b["status"] == "failed_requires_action")
        assert stuck["fully_deleted"] is False
        assert "audit_bodies" in stuck["remaining_copies"]
        assert "injected permanent failure" in stuck["last_error"]
        layers = {layer["layer"]: layer for layer in stuck["layers"]}
        assert layers["primary_memories"]["status"] == "done"  # earlier layers keep their checkpoints
        assert layers["audit_bodies"]["status"] == "failed"
        assert api.post(f"/memory-deletions/{job}/resume", headers=auth(key)).status_code == 403
    finally:
        faults.permanent.clear()
    resumed = api.post(f"/memory-deletions/{job}/resume", headers=auth(operator))
    assert resumed.status_code == 200, resumed.text
    body = wait_for(api, key, job, completed)
    layers = {layer["layer"]: layer for layer in body["layers"]}
    assert layers["primary_memories"]["removed"] == 1  # not purged twice
    assert body["fully_deleted"] is True


def test_a_retention_hold_blocks_the_purge_but_not_the_barrier(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant, user="dana")
    admin = make_key(tenant=tenant, user="legal", roles=("admin",))
    held = api.post("/retention-holds", json={"user_id": "dana", "reason": "litigation"}, headers=auth(key))
    assert held.status_code == 403
    hold = api.post("/retention-holds", json={"user_id": "dana", "reason": "litigation"}, headers=auth(admin))
    assert hold.status_code == 201, hold.text
    job = _delete_one(api, key, "诉讼保全期间的删除")
    blocked = wait_for(api, key, job, lambda b: b["status"] == "blocked_by_retention")
    assert blocked["fully_deleted"] is False
    assert api.post("/memory-query", json={"query": "诉讼保全"}, headers=auth(key)).json()["items"] == []
    time.sleep(1.5)
    still: dict[str, Any] = api.get(f"/memory-deletions/{job}", headers=auth(key)).json()
    assert still["status"] == "blocked_by_retention"
    with tenant_session(engine, tenant) as session:
        kept = session.execute(text("SELECT content FROM memories WHERE owner_id = 'dana'")).scalars().all()
    assert kept == ["诉讼保全期间的删除"]  # held: hidden, but not destroyed

    released = api.post(f"/retention-holds/{hold.json()['hold_id']}/release", headers=auth(admin))
    assert released.status_code == 200
    assert released.json()["released_at"] is not None
    assert wait_for(api, key, job, completed)["fully_deleted"] is True


def test_resuming_a_job_that_needs_no_resume_is_a_409(api: TestClient, make_key: MakeKey) -> None:
    """Issue 12, finding 7: resuming a completed job signalled its closed workflow and answered 500."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    operator = make_key(tenant=tenant, user="sre", roles=("operator",))
    job = _delete_one(api, key, "已经删完的记忆")
    wait_for(api, key, job, completed)
    response = api.post(f"/memory-deletions/{job}/resume", headers=auth(operator))
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "not_resumable" and error["details"] == {"status": "completed"}
    assert api.get(f"/memory-deletions/{job}", headers=auth(key)).json()["status"] == "completed"
