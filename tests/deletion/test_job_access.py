"""Who may read a deletion job, and what resume does in each state: typed answers, no oracle, no 500."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from memory.db import tenant_session
from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.scope import ScopeType
from memory.identity.auth import PrincipalContext
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate


def _write(api: TestClient, key: str, content: str, **overrides: str) -> str:
    response = api.post("/memory-candidates", json=candidate(content, **overrides), headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


def test_another_users_job_and_a_missing_one_get_the_same_404(api: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    job = api.delete(f"/memories/{_write(api, alice, '爱丽丝的秘密')}", headers=auth(alice)).json()["job_id"]
    missing = str(uuid.uuid4())
    for job_id in (job, missing):
        response = api.get(f"/memory-deletions/{job_id.upper()}", headers=auth(bob))
        assert response.status_code == 404
        assert response.json() == {"error": {"code": "not_found", "message": f"deletion job {job_id} does not exist",
                                             "details": {}}}
    assert api.get(f"/memory-deletions/{job.upper()}", headers=auth(alice)).json()["job_id"] == job
    wait_for(api, alice, job, completed)


@pytest.mark.parametrize("space", ["TENANT", "SYSTEM"])
def test_a_user_named_like_the_owner_of_shared_memories_does_not_read_their_deletion_jobs(
    api: TestClient, make_key: MakeKey, space: str
) -> None:
    """A TENANT memory's owner id is the tenant id, a SYSTEM memory's is "system": neither is a user, whoever is
    called so."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    namesake = make_key(tenant=tenant, user=tenant if space == "TENANT" else "system")
    shared = _write(api, admin, f"{space} 级别的公告", space=space, category="CASE")
    job = api.delete(f"/memories/{shared}", headers=auth(admin)).json()["job_id"]
    assert api.get(f"/memory-deletions/{job}", headers=auth(namesake)).status_code == 404
    assert wait_for(api, admin, job, completed)["fully_deleted"] is True
    # Their own jobs they still read, as the subject.
    own = api.delete(f"/memories/{_write(api, namesake, '我自己的记忆')}", headers=auth(namesake)).json()["job_id"]
    assert wait_for(api, namesake, own, completed)["fully_deleted"] is True


def _job_in(engine: Engine, tenant: str, memory_id: str, status: str) -> str:
    """A job put straight into ``status``, with no workflow behind it."""
    principal = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), "test")
    with tenant_session(engine, tenant) as session:
        scope = ScopeRequest(ScopeType.MEMORY, memory_id=uuid.UUID(memory_id))
        job = request_deletion(session, principal, f"r-{status}", scope, "sha").job
        session.execute(text("DELETE FROM deletion_outbox WHERE job_id = :j"), {"j": job.job_id})
        session.execute(text("UPDATE deletion_jobs SET status = :s WHERE job_id = :j"), {"s": status, "j": job.job_id})
    return str(job.job_id)


def test_resume_is_a_typed_409_unless_the_job_waits_for_an_operator(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, operator = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="ops", roles=("operator",))
    done = api.delete(f"/memories/{_write(api, alice, '已经删完的记忆')}", headers=auth(alice)).json()["job_id"]
    wait_for(api, alice, done, completed)
    jobs = {"completed": done}
    for status in ("accepted", "running", "retry_wait", "blocked_by_retention"):
        jobs[status] = _job_in(engine, tenant, _write(api, alice, f"状态 {status} 的记忆"), status)
    for status, job in jobs.items():
        response = api.post(f"/memory-deletions/{job}/resume", headers=auth(operator))
        assert response.status_code == 409, (status, response.text)
        error = response.json()["error"]
        assert (error["code"], error["details"]) == ("not_resumable", {"status": status})
        assert status in error["message"]
    assert api.post(f"/memory-deletions/{uuid.uuid4()}/resume", headers=auth(operator)).status_code == 404
    assert api.post(f"/memory-deletions/{done}/resume", headers=auth(alice)).status_code == 403


def test_a_hold_on_a_user_named_like_the_tenant_does_not_block_deleting_tenant_memories(
    api: TestClient, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    hold = api.post("/retention-holds", json={"user_id": tenant, "reason": "litigation"}, headers=auth(admin))
    assert hold.status_code == 201, hold.text
    shared = _write(api, admin, "全公司的公告", space="TENANT", category="CASE")
    job = api.delete(f"/memories/{shared}", headers=auth(admin)).json()["job_id"]
    assert wait_for(api, admin, job, completed)["fully_deleted"] is True
