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

from activities.deletion import DeletionActivities, JobRef, PurgeRequest
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


def verification_evidence(engine: Engine, tenant: str, job_id: str) -> dict[str, Any]:
    with tenant_session(engine, tenant) as session:
        return dict(session.execute(select(DeletionLayer.evidence).where(
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


def test_a_job_failed_by_a_round_resumes_to_a_clean_verification_of_its_own(
    rounds_api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    """A round fails a job whose text survives elsewhere; once the copy is gone and an operator resumes it, the next
    round completes it, with that verification's evidence alone (record_layer adds numbers up: 2 probes, 2 rounds
    were reported after a resume); a purge retried after a round decided its job changes nothing."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key, admin = make_key(tenant=tenant), make_key(tenant=tenant, user="root", roles=("admin",))
    secret = "我的保险柜密码提示是祖母老家门牌号"
    memory = remember(rounds_api, key, secret)
    copied = remember(rounds_api, key, f"备忘：{secret}，别告诉别人")
    job_id = request_deletion(rounds_api, key, memory)
    assert ended(rounds_api, key, job_id)["status"] == "failed_requires_action"
    first = verification_evidence(engine, tenant, job_id)
    assert ended(rounds_api, key, request_deletion(rounds_api, key, copied))["status"] == "completed"

    resumed = rounds_api.post(f"/memory-deletions/{job_id}/resume", headers=auth(admin))
    assert resumed.status_code == 200, resumed.text
    job = poll(rounds_api, key, f"/memory-deletions/{job_id}", lambda body: body["status"] == "completed", 90)

    assert job["fully_deleted"] is True and job["remaining_copies"] == [], job
    evidence = verification_evidence(engine, tenant, job_id)
    assert first["remaining_copies"] and first["verified_probes"] >= 1, first
    assert (evidence["round_jobs"], evidence["remaining_copies"]) == (1, []), evidence
    assert evidence["verified_probes"] == first["verified_probes"], (first, evidence)  # the same probes, once
    with tenant_session(engine, tenant) as session:
        layers = session.execute(select(DeletionLayer.layer, DeletionLayer.status, DeletionLayer.removed).where(
            DeletionLayer.job_id == uuid.UUID(job_id)).order_by(DeletionLayer.position)).all()
    late = DeletionActivities(engine, artifacts=settings.artifact_root(engine)).purge(
        PurgeRequest(JobRef(tenant, job_id), again=True))
    with tenant_session(engine, tenant) as session:
        after = session.execute(select(DeletionLayer.layer, DeletionLayer.status, DeletionLayer.removed).where(
            DeletionLayer.job_id == uuid.UUID(job_id)).order_by(DeletionLayer.position)).all()
    assert late == {} and after == layers


def test_a_tenant_in_debt_waits_for_its_budget_then_is_verified(
    rounds_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """A tenant whose rounds took more than its share waits until the bucket is refilled: its purge runs at once
    (the barrier held already), its verification only once the debt is paid, then it completes."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    memory = remember(rounds_api, key, "我计划明年春天搬去成都工作")
    with tenant_session(engine, tenant) as session:  # 2.5 s in debt at 0.5 s a second: 5 s to wait
        session.execute(text("INSERT INTO residue_rounds VALUES (:t, -2.5, clock_timestamp(), 3.5, 1, 1)"),
                        {"t": tenant})
    refilled = time.monotonic() + 5.0
    job_id = request_deletion(rounds_api, key, memory)
    while verification_status(engine, tenant, job_id) != PURGED:
        assert time.monotonic() < refilled + 30, "the purge did not end"
        time.sleep(0.1)
    waited = rounds_api.get(f"/memory-deletions/{job_id}", headers=auth(key)).json()
    assert waited["status"] == "running" or time.monotonic() > refilled - 0.5, waited  # purged, not yet verified

    job = ended(rounds_api, key, job_id)

    assert job["status"] == "completed" and job["fully_deleted"] is True, job
    assert time.monotonic() >= refilled - 0.2  # never before the bucket was refilled
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
        assert 3.0 < wait_for_budget(session, tenant, budget) <= 4.1  # less what was refilled meanwhile
        assert session.execute(select(ResidueRound.rounds, ResidueRound.last_jobs)).one() == (2, 5)
    with pytest.raises(ValueError, match="share"):
        ScanBudget(share=0, burst_seconds=1)
