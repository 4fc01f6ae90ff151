"""Verification rounds (issue 23, finding 7): one residue scan verifies every purged deletion of a tenant, each job
decided on its own copies, and a tenant's rounds spend a budget of seconds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text

from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.deletion.residue import claim_scan
from memory.deletion.rounds import PURGED, ScanBudget, spend, wait_for_budget
from memory.models import DeletionLayer, ResidueRound
from tests.conftest import MakeKey, auth, poll
from tests.factories import candidate
from tests.workers import ThreadWorker

BUDGET = ScanBudget(share=0.5, burst_seconds=1.0)


@pytest.fixture(scope="module")
def rounds_api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    """An API and a worker of their own whose tenants' rounds earn half a second a second, one second at once. Its
    event loop's default executor has one thread: a round waited there for history fetches that needed another of
    its threads, and six rounds at once (the default size on two cores) deadlocked a worker."""
    own = settings.model_copy(update={"task_queue": f"rounds-{uuid.uuid4().hex[:8]}"})
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine), scan_budget=BUDGET,
                          default_threads=1).start()
    try:
        with TestClient(create_app(own)) as client:
            yield client
    finally:
        worker.stop()


def remember(client: TestClient, key: str, content: str) -> str:
    created = client.post("/memory-candidates", json=candidate(content), headers=auth(key))
    assert created.status_code == 201, created.text
    return str(created.json()["memory_id"])


def request_deletion(client: TestClient, key: str, memory_id: str) -> str:
    accepted = client.post("/deletion-requests", json={
        "deletion_request_id": f"d-{uuid.uuid4().hex[:8]}", "scope": {"type": "memory", "memory_id": memory_id}},
        headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["job_id"])


def ended(client: TestClient, key: str, job_id: str) -> dict[str, Any]:
    return poll(client, key, f"/memory-deletions/{job_id}",
                lambda job: job["status"] in ("completed", "failed_requires_action"), 90)


def verification_status(engine: Engine, tenant: str, job_id: str) -> str:
    with tenant_session(engine, tenant) as session:
        return str(session.execute(select(DeletionLayer.status).where(
            DeletionLayer.job_id == uuid.UUID(job_id), DeletionLayer.layer == "verification_probes")).scalar_one())


def test_one_round_verifies_every_purged_job_each_on_its_own_copies(
    rounds_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """Three deletions purged while the tenant's scan is held are verified by the one round that follows: the two
    clean ones complete, the one whose text survives in a memory the deletion does not cover fails with that copy
    listed, and no job is charged another's copy."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    clean = [remember(rounds_api, key, text) for text in ("我下周二去杭州开年度预算会", "我每周四下午练习大提琴")]
    secret = "我的保险柜密码提示是祖母老家门牌号"
    kept = [remember(rounds_api, key, secret)]
    copied = remember(rounds_api, key, f"备忘：{secret}，别告诉别人")
    with tenant_session(engine, tenant) as holder:
        assert claim_scan(holder, tenant)  # "another round" holds the tenant's scan
        jobs = [request_deletion(rounds_api, key, memory) for memory in [*clean, *kept]]
        deadline = time.monotonic() + 60
        while any(verification_status(engine, tenant, job) != PURGED for job in jobs):
            assert time.monotonic() < deadline, "the purges did not end"
            time.sleep(0.2)
    done = [ended(rounds_api, key, job) for job in jobs]

    assert [job["status"] for job in done] == ["completed", "completed", "failed_requires_action"], done
    assert done[0]["remaining_copies"] == [] and done[1]["remaining_copies"] == [], done
    assert f"memories.content#{copied}/1" in done[2]["remaining_copies"], done[2]
    with tenant_session(engine, tenant) as session:
        rounds = session.execute(select(ResidueRound)).scalar_one()
        assert (rounds.rounds, rounds.last_jobs) == (1, 3)
        evidence = session.execute(select(DeletionLayer.evidence).where(
            DeletionLayer.job_id.in_([uuid.UUID(job) for job in jobs]),
            DeletionLayer.layer == "verification_probes")).scalars().all()
    assert [e["round_jobs"] for e in evidence] == [3, 3, 3]


def test_a_tenant_in_debt_waits_for_its_budget_then_is_verified(
    rounds_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """A tenant whose rounds took more than its share waits until the bucket is refilled: its purge runs at once
    (the barrier held already), its verification only once the debt is paid, then it completes."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    memory = remember(rounds_api, key, "我计划明年春天搬去成都工作")
    with tenant_session(engine, tenant) as session:  # 1.5 s in debt at 0.5 s a second: 3 s to wait
        session.execute(text("INSERT INTO residue_rounds VALUES (:t, -1.5, clock_timestamp(), 2.5, 1, 1)"),
                        {"t": tenant})
    started = time.monotonic()
    job_id = request_deletion(rounds_api, key, memory)
    while verification_status(engine, tenant, job_id) != PURGED:
        assert time.monotonic() - started < 30, "the purge did not end"
        time.sleep(0.1)
    waited = rounds_api.get(f"/memory-deletions/{job_id}", headers=auth(key)).json()
    assert time.monotonic() - started < 2.5 and waited["status"] == "running", waited

    job = ended(rounds_api, key, job_id)

    assert job["status"] == "completed" and job["fully_deleted"] is True, job
    assert time.monotonic() - started >= 2.9
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(ResidueRound.rounds)).scalar_one() == 2


def test_the_budget_is_a_bucket_of_seconds(engine: Engine, make_key: MakeKey) -> None:
    """A fresh tenant may start at once; a round longer than the bucket leaves a debt that its share repays."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    budget = ScanBudget(share=0.5, burst_seconds=1.0)
    with tenant_session(engine, tenant) as session:
        assert wait_for_budget(session, tenant, budget) == 0
        spend(session, tenant, 0.4, 2, budget)  # 0.6 s left
        assert wait_for_budget(session, tenant, budget) == 0
        spend(session, tenant, 2.6, 5, budget)  # 2 s of debt: 4 s at half a second a second
        assert 3.8 < wait_for_budget(session, tenant, budget) <= 4.1
        assert session.execute(select(ResidueRound.rounds, ResidueRound.last_jobs)).one() == (2, 5)
    with pytest.raises(ValueError, match="share"):
        ScanBudget(share=0, burst_seconds=1)
