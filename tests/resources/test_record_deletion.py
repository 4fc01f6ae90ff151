"""Forgetting reaches source records: a subject deletion hides them at its barrier, then purges their rows, their
search projection and their long bodies in the artifact store, and verification proves nothing is left; another
user's records (and bodies with the same bytes) stay."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.settings import Settings
from memory.artifact_store import ArtifactStore
from memory.db import tenant_session
from memory.deletion.jobs import get_job
from memory.deletion.verify import verify
from memory.resources.bodies import encode, record_store
from memory.resources.body_store import bind_store
from tests.conftest import MakeKey, auth, poll
from tests.workers import api_with_worker


@pytest.fixture(scope="module")
def api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "record-deletion") as client:
        yield client


def _body(word: str) -> str:
    line = f"{word}：提醒补发改成通知兜底。Li: ship the fallback first.\n"
    return (line * (110_000 // len(line) + 1))[:110_000]


def _transcript(body: str) -> dict[str, Any]:
    return {"title": "评审 转写", "language": "zh-CN", "recorded_at": "2026-07-14T14:00:00+08:00", "text": body,
            "segments": [{"speaker": "王设计", "start_ms": 0, "end_ms": 4200, "text": "下周三前出方案"}]}


def _put(api: TestClient, key: str, path: str, data: dict[str, Any]) -> dict[str, Any]:
    response = api.put(f"/records/{path}", json={"data": data}, headers=auth(key))
    assert response.status_code == 201, response.text
    read = api.get(f"/records/{path}", headers=auth(key)).json()
    return dict(read)


def _rows(engine: Engine, tenant: str, owner: str) -> dict[str, int]:
    with tenant_session(engine, tenant) as session:
        return {table: session.execute(text(f"SELECT count(*) FROM {table} WHERE owner_id = :o"), {"o": owner})
                .scalar_one() for table in ("resource_records", "resource_search", "resource_artifacts")}


def _sha(read: dict[str, Any]) -> str:
    [long_field] = read["long_fields"]
    return str(long_field["sha256"])


def _backdate(engine: Engine, store: ArtifactStore, sha: str, *, seconds: int) -> None:
    """Date a stored body this much earlier (the PostgreSQL store's clock), as a crash long before would have."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE artifact_objects SET created_at = created_at - make_interval(secs => :s) "
                          "WHERE namespace = :ns AND sha256 = :sha"), {"s": seconds, "ns": store.namespace, "sha": sha})


def test_subject_deletion_hides_then_purges_records_projection_and_bodies(
    api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    tenant, other_tenant = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    carol = make_key(tenant=other_tenant, user="alice")  # another tenant's alice, same bytes
    own, shared = _body("爱丽丝独有"), _body("共同")
    todo = {"title": "更新推送配置", "status": "open"}
    _put(api, alice, "todo/t-1", todo)
    alone = _put(api, alice, "transcript/tr-own", _transcript(own))
    alices_shared = _put(api, alice, "transcript/tr-shared", _transcript(shared))
    bobs = _put(api, bob, "transcript/tr-shared", _transcript(shared))
    carols = _put(api, carol, "transcript/tr-shared", _transcript(shared))
    _put(api, bob, "todo/t-1", todo)
    store, other_store = (record_store(settings.artifact_root(engine), tenant),
                          record_store(settings.artifact_root(engine), other_tenant))
    own_sha, shared_sha = _sha(alone), _sha(alices_shared)
    assert _sha(bobs) == _sha(carols) == shared_sha != own_sha
    assert store.exists(own_sha) and store.exists(shared_sha) and other_store.exists(shared_sha)
    assert _rows(engine, tenant, "alice") == {"resource_records": 3, "resource_search": 5, "resource_artifacts": 2}

    accepted = api.post("/deletion-requests", json={"deletion_request_id": f"forget-{uuid.uuid4().hex[:8]}",
                                                    "scope": {"type": "subject"}}, headers=auth(alice))
    assert accepted.status_code == 202, accepted.text
    # At once: her records are as missing as ones never written, and cannot be written over while they go.
    for path in ("todo/t-1", "transcript/tr-own", "transcript/tr-shared"):
        assert api.get(f"/records/{path}", headers=auth(alice)).status_code == 404, path
    rewrite = api.put("/records/todo/t-1", json={"data": {**todo, "status": "done"}, "expected_version": 1},
                      headers=auth(alice))
    assert (rewrite.status_code, rewrite.json()["error"]["code"]) == (409, "record_deletion_pending")
    assert api.get("/records/todo/t-1", headers=auth(bob)).status_code == 200

    job = poll(api, alice, f"/memory-deletions/{accepted.json()['job_id']}",
               lambda body: body["status"] in ("completed", "failed_requires_action"), 60)
    assert (job["status"], job["fully_deleted"], job["remaining_copies"]) == ("completed", True, []), job
    layers = {layer["layer"]: layer for layer in job["layers"]}
    evidence = layers["source_records"]["evidence"]
    assert layers["source_records"]["removed"] == 3
    assert (evidence["records_deleted"], evidence["record_projection_rows"], evidence["record_bodies_deleted"]) == (
        3, 5, 1)
    # Both bodies were checked; once verification passed, their sha256s are not kept.
    assert evidence["record_bodies_verified"] == 2 and "body_sha256" not in evidence
    assert _rows(engine, tenant, "alice") == {"resource_records": 0, "resource_search": 0, "resource_artifacts": 0}
    assert not store.exists(own_sha)
    # Bob's record still names the shared bytes, and another tenant's copy is a file of its own: both stay.
    assert store.exists(shared_sha) and other_store.exists(shared_sha)
    assert _rows(engine, tenant, "bob") == {"resource_records": 2, "resource_search": 3, "resource_artifacts": 1}
    assert api.get("/records/transcript/tr-shared", headers=auth(bob)).json()["data"] == _transcript(shared)
    assert api.get("/records/transcript/tr-shared", headers=auth(carol)).json()["data"] == _transcript(shared)
    # Written after the barrier, a record of the same id is new data, and readable.
    assert api.put("/records/todo/t-1", json={"data": todo}, headers=auth(alice)).status_code == 201
    assert api.get("/records/todo/t-1", headers=auth(alice)).json()["version"] == 1

    # Verification counts a body left behind: put the deleted bytes back (dated before the barrier) and it is
    # found again, as an unreferenced body of the tenant's store (the job no longer keeps the bodies' sha256s).
    _backdate(engine, store, store.put(encode(own).encode("utf-8")), seconds=86_400)
    with tenant_session(engine, tenant) as session:
        bind_store(session, store)
        found = verify(session, get_job(session, tenant, uuid.UUID(job["job_id"])))
    assert (found.clean, found.hits) == (False, {"record_orphan_bodies": 1})


def test_an_update_deletes_the_body_it_replaced_unless_another_record_names_it(
    api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    store = record_store(settings.artifact_root(engine), tenant)
    first, second, shared = _body("初稿"), _body("终稿"), _body("同一份")
    old_sha = _sha(_put(api, alice, "transcript/tr-1", _transcript(first)))
    updated = api.put("/records/transcript/tr-1", json={"data": _transcript(second), "expected_version": 1},
                      headers=auth(alice))
    assert (updated.status_code, updated.json()["version"]) == (200, 2), updated.text
    read = api.get("/records/transcript/tr-1", headers=auth(alice)).json()
    assert read["data"] == _transcript(second)
    assert store.exists(_sha(read))
    assert not store.exists(old_sha)  # the first version's text is nowhere any more
    assert _rows(engine, tenant, "alice")["resource_artifacts"] == 1

    # Bytes another record (here bob's) still names stay when one record stops naming them.
    shared_sha = _sha(_put(api, alice, "transcript/tr-2", _transcript(shared)))
    assert _sha(_put(api, bob, "transcript/tr-2", _transcript(shared))) == shared_sha
    short = api.put("/records/transcript/tr-2", json={"data": _transcript("短了"), "expected_version": 1},
                    headers=auth(alice))
    assert short.status_code == 200, short.text
    assert api.get("/records/transcript/tr-2", headers=auth(alice)).json()["long_fields"] == []
    assert store.exists(shared_sha)
    assert api.get("/records/transcript/tr-2", headers=auth(bob)).json()["data"] == _transcript(shared)
    # ... and go once the last record naming them does.
    assert api.put("/records/transcript/tr-2", json={"data": _transcript("也短了"), "expected_version": 1},
                   headers=auth(bob)).status_code == 200
    assert not store.exists(shared_sha)


def test_a_subject_deletion_leaves_no_unreferenced_body_in_the_tenants_store(
    api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    store = record_store(settings.artifact_root(engine), tenant)
    bobs = _sha(_put(api, bob, "transcript/tr-1", _transcript(_body("鲍勃的"))))
    _put(api, alice, "transcript/tr-1", _transcript(_body("爱丽丝的")))
    # What a crash leaves: bytes written for a record that never committed (a write to the store is atomic, so
    # there is no half-written one).
    orphan_bytes = encode(_body("没提交的")).encode("utf-8")
    orphan = store.put(orphan_bytes)
    _backdate(engine, store, orphan, seconds=600)

    accepted = api.post("/deletion-requests", json={"deletion_request_id": f"forget-{uuid.uuid4().hex[:8]}",
                                                    "scope": {"type": "subject"}}, headers=auth(alice))
    assert accepted.status_code == 202, accepted.text
    job = poll(api, alice, f"/memory-deletions/{accepted.json()['job_id']}",
               lambda body: body["status"] in ("completed", "failed_requires_action"), 60)
    assert (job["status"], job["fully_deleted"]) == ("completed", True), job
    evidence = {layer["layer"]: layer for layer in job["layers"]}["source_records"]["evidence"]
    assert (evidence["record_bodies_deleted"], evidence["record_orphan_bodies_deleted"]) == (1, 1)
    assert not store.exists(orphan)
    assert store.exists(bobs)  # referenced: bob's record reads back whole
    assert api.get("/records/transcript/tr-1", headers=auth(bob)).json()["data"] == _transcript(_body("鲍勃的"))

    # Verification would have found it: put it back as it was before the barrier.
    store.put(orphan_bytes)
    _backdate(engine, store, orphan, seconds=600)
    with tenant_session(engine, tenant) as session:
        bind_store(session, store)
        found = verify(session, get_job(session, tenant, uuid.UUID(job["job_id"])))
    assert (found.clean, found.hits) == (False, {"record_orphan_bodies": 1})


def test_deleting_one_record_hides_it_at_once_then_purges_it_alone(
    api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    carol = make_key(tenant=f"t-{uuid.uuid4().hex[:12]}", user="alice")
    store = record_store(settings.artifact_root(engine), tenant)
    todo = {"title": "更新推送配置", "status": "open"}
    doomed_body, kept_body = _body("要忘掉的"), _body("留着的")
    doomed = _sha(_put(api, alice, "transcript/tr-1", _transcript(doomed_body)))
    kept = _sha(_put(api, alice, "transcript/tr-2", _transcript(kept_body)))
    _put(api, alice, "todo/t-1", todo)
    _put(api, bob, "transcript/tr-1", _transcript(kept_body))

    # Another user's or tenant's record is the 404 of a missing one, and stays.
    for key in (bob, carol):
        other = api.delete("/records/transcript/tr-2", headers=auth(key))
        assert (other.status_code, other.json()["error"]["code"]) == (404, "not_found"), other.text
    assert api.delete("/records/transcript/tr-404", headers=auth(alice)).status_code == 404

    accepted = api.delete("/records/transcript/tr-1", headers=auth(alice))
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]
    assert api.get("/records/transcript/tr-1", headers=auth(alice)).status_code == 404
    rewrite = api.put("/records/transcript/tr-1", json={"data": _transcript("改"), "expected_version": 1},
                      headers=auth(alice))
    assert (rewrite.status_code, rewrite.json()["error"]["code"]) == (409, "record_deletion_pending")
    assert api.delete("/records/transcript/tr-1", headers=auth(alice)).json()["job_id"] == job_id

    job = poll(api, alice, f"/memory-deletions/{job_id}",
               lambda body: body["status"] in ("completed", "failed_requires_action"), 60)
    assert (job["status"], job["fully_deleted"], job["remaining_copies"]) == ("completed", True, []), job
    assert job["scope"] == {"type": "record", "record": "transcript:tr-1", "user_id": "alice"}
    evidence = {layer["layer"]: layer for layer in job["layers"]}["source_records"]["evidence"]
    assert (evidence["records_deleted"], evidence["record_bodies_deleted"], evidence["record_bodies_verified"]) == (
        1, 1, 1)
    assert "record_orphan_bodies_deleted" not in evidence  # one record's deletion leaves the rest of the store
    assert not store.exists(doomed) and store.exists(kept)
    # Only that record went: her others, and bob's record of the same id, read back whole.
    assert _rows(engine, tenant, "alice") == {"resource_records": 2, "resource_search": 3, "resource_artifacts": 1}
    assert api.get("/records/transcript/tr-2", headers=auth(alice)).json()["data"] == _transcript(kept_body)
    assert api.get("/records/todo/t-1", headers=auth(alice)).json()["data"] == todo
    assert api.get("/records/transcript/tr-1", headers=auth(bob)).json()["data"] == _transcript(kept_body)
    # Repeated after the purge: still the same job.
    assert api.delete("/records/transcript/tr-1", headers=auth(alice)).json()["job_id"] == job_id

    # Verification would have found the body left behind: between the purge and the finish the layer's
    # evidence names the body (put back here; a completed job keeps only the count).
    store.put(encode(doomed_body).encode("utf-8"))
    with tenant_session(engine, tenant) as session:
        session.execute(text("UPDATE deletion_layers SET evidence = evidence || jsonb_build_object('body_sha256',"
                             " jsonb_build_array(CAST(:sha AS text))) WHERE job_id = CAST(:job AS uuid)"
                             " AND layer = 'source_records'"), {"sha": doomed, "job": job_id})
        bind_store(session, store)
        found = verify(session, get_job(session, tenant, uuid.UUID(job_id)))
    assert (found.clean, found.hits) == (False, {"record_bodies": 1})
    store.delete(doomed)

    # Written again, it is a new record, and deleting it is a new job.
    assert api.put("/records/transcript/tr-1", json={"data": _transcript("新的")}, headers=auth(alice)).status_code \
        == 201
    again = api.delete("/records/transcript/tr-1", headers=auth(alice))
    assert again.status_code == 202 and again.json()["job_id"] != job_id
    assert api.get("/records/transcript/tr-1", headers=auth(alice)).status_code == 404
