"""Review fixes: a record write fenced by its subject's deletion epoch, deletion refused to public clients,
bodies of refused writes never left behind, no sha256 kept in a completed job's evidence, ids and refs with a
trailing newline refused."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.settings import Settings
from memory.artifact_store import ArtifactStore
from memory.db import tenant_session
from memory.resources.bodies import record_store
from tests.conftest import MakeKey, auth, poll
from tests.workers import api_with_worker


@pytest.fixture(scope="module")
def api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "resource-fixes") as client:
        yield client


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _body(word: str) -> str:
    line = f"{word}: secret transcript line.\n"
    return (line * (110_000 // len(line) + 1))[:110_000]


def _transcript(body: str) -> dict[str, Any]:
    return {"title": "t", "language": "en", "recorded_at": "2026-07-14T14:00:00+08:00", "text": body,
            "segments": [{"speaker": "a", "start_ms": 0, "end_ms": 1, "text": "x"}]}


def _files(store: ArtifactStore) -> list[str]:
    return [stored.sha256 for stored in store.list()]


def _finished(api: TestClient, key: str, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = poll(api, key, f"/memory-deletions/{job_id}",
                               lambda v: v["status"] in ("completed", "failed_requires_action"), 60)
    return job


def test_a_record_write_in_flight_holds_back_a_subject_deletions_barrier_and_is_purged_by_it(
    api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    """A PUT between its INSERT and its COMMIT share-locks the subject's epoch: the barrier waits for it, so the
    record is written before the barrier and the deletion purges it (rather than leaving it behind)."""
    from memory.identity.auth import PrincipalContext
    from memory.resources.catalog import load_catalog
    from memory.resources.records import put_record

    tenant = _tenant()
    key = make_key(tenant=tenant, user="alice")
    principal = PrincipalContext(tenant_id=tenant, user_id="alice", agent_id=None, roles=frozenset({"writer"}),
                                 key_id="x")
    accepted: dict[str, Any] = {}
    with tenant_session(engine, tenant) as session:
        put_record(session, principal, load_catalog().get("todo"), "t-late",
                   {"title": "IN-FLIGHT SECRET", "status": "open"}, None,
                   record_store(settings.artifact_root(engine), tenant))

        def request() -> None:
            accepted["response"] = api.post(
                "/deletion-requests", headers=auth(key),
                json={"deletion_request_id": f"f-{uuid.uuid4().hex[:8]}", "scope": {"type": "subject"}})

        barrier = threading.Thread(target=request)
        barrier.start()
        barrier.join(timeout=2)
        assert barrier.is_alive(), "the barrier did not wait for the write in flight"
    barrier.join(timeout=30)
    response = accepted["response"]
    assert response.status_code == 202, response.text
    assert _finished(api, key, response.json()["job_id"])["status"] == "completed"
    with tenant_session(engine, tenant) as session:
        assert session.execute(text("SELECT count(*) FROM resource_records")).scalar_one() == 0
        assert session.execute(text("SELECT count(*) FROM resource_search")).scalar_one() == 0


@pytest.mark.parametrize("scope", [{"type": "record", "resource": "todo", "record_id": "t1"}, {"type": "subject"}])
def test_a_public_client_key_cannot_request_a_deletion(
    api: TestClient, make_key: MakeKey, scope: dict[str, str]
) -> None:
    """A public client reads resources only: POST /deletion-requests is a 403, as DELETE /records is."""
    tenant = _tenant()
    owner = make_key(tenant=tenant, user="alice")
    public = make_key(tenant=tenant, user="alice", roles=["public_client"])
    assert api.put("/records/todo/t1", json={"data": {"title": "x", "status": "open"}},
                   headers=auth(owner)).status_code == 201
    refused = api.post("/deletion-requests", json={"deletion_request_id": "pub-1", "scope": scope},
                       headers=auth(public))
    assert refused.status_code == 403, refused.text
    assert "a public_client key reads the public resource catalog only" in refused.json()["error"]["message"]
    assert api.get("/records/todo/t1", headers=auth(owner)).status_code == 200
    assert api.get("/resources", headers=auth(owner)).status_code == 200


def test_a_refused_write_leaves_no_body_in_the_store(
    api: TestClient, make_key: MakeKey, settings: Settings, engine: Engine
) -> None:
    """A stale expected_version, a write while the record's deletion is pending and a field the search index
    refuses: none leaves its long body in the tenant's store, and a completed record deletion leaves nothing."""
    tenant = _tenant()
    key = make_key(tenant=tenant, user="alice")
    store = record_store(settings.artifact_root(engine), tenant)
    assert api.put("/records/transcript/tr-1", json={"data": _transcript(_body("v1"))},
                   headers=auth(key)).status_code == 201
    [v1] = _files(store)
    stale = api.put("/records/transcript/tr-1", headers=auth(key),
                    json={"data": _transcript(_body("v2-SECRET")), "expected_version": 7})
    assert stale.status_code == 409, stale.text
    assert _files(store) == [v1]

    accepted = api.delete("/records/transcript/tr-1", headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    pending = api.put("/records/transcript/tr-1", headers=auth(key),
                      json={"data": _transcript(_body("v3-PENDING")), "expected_version": 1})
    assert pending.status_code in (404, 409), pending.text
    assert _finished(api, key, accepted.json()["job_id"])["status"] == "completed"
    assert _files(store) == []

    words = " ".join(f"w{i:06d}x" for i in range(100_000))
    refused = api.put("/records/transcript/tr-2", json={"data": {"title": "t", "text": words}}, headers=auth(key))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "field_too_large_to_index"
    assert _files(store) == []


def test_a_completed_deletion_keeps_no_sha256_of_the_bodies_it_deleted(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """Verification needs the deleted bodies' sha256s; once it passed, the evidence keeps only their count."""
    tenant = _tenant()
    key = make_key(tenant=tenant, user="alice")
    assert api.put("/records/transcript/tr-1", json={"data": _transcript(_body("gone"))},
                   headers=auth(key)).status_code == 201
    sha = api.get("/records/transcript/tr-1", headers=auth(key)).json()["long_fields"][0]["sha256"]
    accepted = api.delete("/records/transcript/tr-1", headers=auth(key))
    job = _finished(api, key, accepted.json()["job_id"])
    assert job["status"] == "completed"
    assert sha not in str(job)
    with tenant_session(engine, tenant) as session:
        evidence = session.execute(
            text("SELECT evidence FROM deletion_layers WHERE job_id = :j AND layer = 'source_records'"),
            {"j": job["job_id"]},
        ).scalar_one()
        everything = session.execute(text("SELECT string_agg(evidence::text, ' ') FROM deletion_layers"
                                          " WHERE job_id = :j"), {"j": job["job_id"]}).scalar_one()
    assert "body_sha256" not in evidence and sha not in everything
    assert evidence["record_bodies_verified"] == 1


def test_a_record_id_or_a_ref_with_a_trailing_newline_is_refused(api: TestClient, make_key: MakeKey) -> None:
    """An id is the whole path segment and a ref the whole value: a trailing newline is not ignored."""
    key = make_key(tenant=_tenant(), user="alice")
    refused = api.put("/records/todo/abc%0A", json={"data": {"title": "x", "status": "open"}}, headers=auth(key))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "invalid_record_id"
    ref = api.put("/records/todo/t2", json={"data": {"title": "x", "status": "open", "episode": "episode:e1\n"}},
                  headers=auth(key))
    assert ref.status_code == 422, ref.text
    assert api.put("/records/todo/t2", json={"data": {"title": "x", "status": "open", "episode": "episode:e1"}},
                   headers=auth(key)).status_code == 201


def test_a_failed_clean_up_after_an_update_committed_does_not_fail_the_update(
    api: TestClient, make_key: MakeKey, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleting the bodies an update replaced runs after its commit: if it fails, the update still answers 200
    (it is committed) and the failure is logged; the bytes left are unreferenced, which a subject deletion sweeps."""
    import memory.resources.records as records

    key = make_key(tenant=_tenant(), user="alice")
    assert api.put("/records/transcript/tr-1", json={"data": _transcript(_body("v1"))},
                   headers=auth(key)).status_code == 201

    def broken(*_: object) -> int:
        raise OSError("store unavailable")

    monkeypatch.setattr(records, "drop_unreferenced", broken)
    updated = api.put("/records/transcript/tr-1", json={"data": _transcript(_body("v2")), "expected_version": 1},
                      headers=auth(key))
    assert (updated.status_code, updated.json()["version"]) == (200, 2), updated.text
    assert "store unavailable" in caplog.text
    assert api.get("/records/transcript/tr-1", headers=auth(key)).json()["version"] == 2


def test_the_deletion_activities_need_the_record_store_from_the_start(engine: Engine) -> None:
    """Without the artifact store a deletion could not purge or verify record bodies: the worker refuses to be
    built, rather than a job failing in the middle of its verification."""
    from activities.deletion import DeletionActivities

    with pytest.raises(TypeError, match="artifacts"):
        DeletionActivities(engine)  # type: ignore[call-arg]
