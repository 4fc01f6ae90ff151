"""Findings 3 and 4 of issue 23: a deletion names only what its caller owns, and its id is the caller's own.

Two users of one tenant, each with their own key. Another user's session, subject, memory or event, and one
nobody has used, are the same 404 as a missing object, write nothing and start no workflow; one user's
deletion-request id (chosen or default) never collides with another's."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from memory.db import tenant_session
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate
from tests.ids.conftest import written
from tests.sessions.conftest import post, say

TODO = {"title": "买菜", "status": "open"}


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _delete(api: TestClient, key: str, scope: dict[str, Any], request_id: str | None = None) -> Any:
    body = {"deletion_request_id": request_id or f"d-{uuid.uuid4().hex[:8]}", "scope": scope}
    return api.post("/deletion-requests", json=body, headers=auth(key))


def _missing(api: TestClient, key: str, url: str) -> dict[str, Any]:
    """The body of a 404 for ``url`` read by ``key``."""
    response = api.get(url, headers=auth(key))
    assert response.status_code == 404, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_session_scope_naming_another_users_session_is_the_404_of_a_missing_one(
    ids_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = _tenant()
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    post(ids_api, alice, "s1", say("m1", "user", "我住在成都"))
    before = written(engine, tenant)
    for target in ("s1", "never-used"):
        refused = _delete(ids_api, bob, {"type": "session", "session_id": target})
        assert refused.status_code == 404, refused.text
        assert refused.json() == _missing(ids_api, bob, f"/sessions/{target}")
    assert written(engine, tenant) == before
    # Alice's session, window and messages are untouched; bob's refused request pre-claimed nothing.
    assert ids_api.get("/sessions/s1", headers=auth(alice)).status_code == 200
    window = ids_api.get("/sessions/s1/window", params={"budget_tokens": 500}, headers=auth(alice))
    assert window.status_code == 200 and "成都" in window.text
    assert ids_api.post("/sessions", json={"session_id": "never-used"}, headers=auth(alice)).status_code == 201


def test_a_subject_scope_naming_nobody_is_a_404_even_for_an_admin(
    ids_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = _tenant()
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    before = written(engine, tenant)
    refused = _delete(ids_api, admin, {"type": "subject", "user_id": "ghost"})
    assert refused.status_code == 404, refused.text
    assert refused.json()["error"]["code"] == "not_found"
    assert written(engine, tenant) == before


def test_an_admin_still_deletes_a_users_session(ids_api: TestClient, make_key: MakeKey) -> None:
    tenant = _tenant()
    alice, admin = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="root", roles=("admin",))
    post(ids_api, alice, "s1", say("m1", "user", "我住在成都"))
    accepted = _delete(ids_api, admin, {"type": "session", "session_id": "s1", "user_id": "alice"})
    assert accepted.status_code == 202, accepted.text
    assert ids_api.get("/sessions/s1", headers=auth(alice)).status_code == 404
    assert wait_for(ids_api, admin, accepted.json()["job_id"], completed)["fully_deleted"] is True


def _memory(api: TestClient, key: str, content: str) -> str:
    response = api.post("/memory-candidates", json=candidate(content), headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


@pytest.mark.parametrize("caller", ["owner", "admin"])
def test_a_deletion_under_the_owners_old_default_id_does_not_block_their_delete(
    ids_api: TestClient, make_key: MakeKey, caller: str
) -> None:
    tenant = _tenant()
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    target = _memory(ids_api, alice, "我住在成都")
    deleter, name = (alice, "alice") if caller == "owner" else (admin, "root")
    # Bob squats the id the real deleter's DELETE used to default to, with a deletion of his own memory.
    squat = _delete(ids_api, bob, {"type": "memory", "memory_id": _memory(ids_api, bob, "bob 的笔记")},
                    request_id=f"memory-{target}-{name}")
    assert squat.status_code == 202, squat.text
    first = ids_api.delete(f"/memories/{target}", headers=auth(deleter))
    assert first.status_code == 202, first.text
    assert first.json()["deletion_request_id"] != f"memory-{target}-{name}"
    again = ids_api.delete(f"/memories/{target}", headers=auth(deleter))  # the README's idempotent repeat
    assert again.status_code == 202 and again.json()["job_id"] == first.json()["job_id"]
    assert wait_for(ids_api, deleter, first.json()["job_id"], completed)["fully_deleted"] is True


def test_two_users_may_use_the_same_deletion_request_id(ids_api: TestClient, make_key: MakeKey) -> None:
    tenant = _tenant()
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    jobs = []
    for key, content in ((bob, "bob 的笔记"), (alice, "我住在成都")):
        accepted = _delete(ids_api, key, {"type": "memory", "memory_id": _memory(ids_api, key, content)}, "gdpr-1")
        assert accepted.status_code == 202, accepted.text
        jobs.append((key, accepted.json()["job_id"]))
    assert jobs[0][1] != jobs[1][1]
    for key, job in jobs:
        assert wait_for(ids_api, key, job, completed)["fully_deleted"] is True


def test_a_default_record_deletion_id_cannot_be_squatted(
    ids_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = _tenant()
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    put = ids_api.put("/records/todo/t1", json={"data": TODO}, headers=auth(alice))
    assert put.status_code == 201, put.text
    with tenant_session(engine, tenant) as session:
        revision = session.execute(text("SELECT revision FROM resource_records WHERE record_id = 't1'")).scalar_one()
    squat = _delete(ids_api, bob, {"type": "memory", "memory_id": _memory(ids_api, bob, "bob 的笔记")},
                    request_id=f"record-todo:t1-alice-r{revision}")
    assert squat.status_code == 202, squat.text
    first = ids_api.delete("/records/todo/t1", headers=auth(alice))
    assert first.status_code == 202, first.text
    assert "alice" not in first.json()["deletion_request_id"]
    assert ids_api.delete("/records/todo/t1", headers=auth(alice)).json()["job_id"] == first.json()["job_id"]
    assert wait_for(ids_api, alice, first.json()["job_id"], completed)["fully_deleted"] is True
