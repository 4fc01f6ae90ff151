"""Ids are each user's own: two users of one tenant can both use a session id, an idempotency key, a commit id
and a deletion-request id, and neither sees, blocks or changes anything of the other's."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate, event
from tests.sessions.conftest import commit, post, say


def test_two_users_each_have_their_own_session_s1(ids_api: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    words = {alice: "我住在成都", bob: "I live in Lisbon"}
    for key, text in words.items():
        opened = ids_api.post("/sessions", json={"session_id": "s1", "title": text}, headers=auth(key))
        assert opened.status_code == 201, opened.text  # nobody's s1 is taken by anybody else's
        post(ids_api, key, "s1", say("m1", "user", text))  # the same idempotency key, each their own
    for key, text in words.items():
        window = ids_api.get("/sessions/s1/window", params={"budget_tokens": 500}, headers=auth(key)).text
        other = words[bob if key == alice else alice]
        assert text in window and other not in window
        done = commit(ids_api, key, "s1", "c1")  # the same commit id, each their own commit
        assert done["status"] in ("completed", "completed_with_rejections"), done
        assert done["sequence_range"] == {"from": 1, "to": 1}
    # Bob deletes his s1: alice's s1, its messages, window, commit and summary stay hers and whole.
    gone = ids_api.post("/deletion-requests", json={"deletion_request_id": "d1", "scope": {"type": "session",
                                                                                           "session_id": "s1"}},
                        headers=auth(bob))
    assert gone.status_code == 202, gone.text
    assert wait_for(ids_api, bob, gone.json()["job_id"], completed)["fully_deleted"] is True
    assert ids_api.get("/sessions/s1", headers=auth(bob)).status_code == 404
    assert ids_api.get("/sessions/s1", headers=auth(alice)).status_code == 200
    assert "成都" in ids_api.get("/sessions/s1/window", params={"budget_tokens": 500}, headers=auth(alice)).text
    assert ids_api.get("/sessions/s1/commits/c1", headers=auth(alice)).json()["status"] != "cancelled_by_deletion"
    assert ids_api.get("/sessions/s1/summaries/latest", headers=auth(alice)).status_code == 200
    replay = ids_api.post("/sessions/s1/messages", json={"messages": [say("m1", "user", words[alice])]},
                          headers=auth(alice))
    assert replay.status_code == 200 and replay.json()["events"][0]["replayed"] is True


def test_idempotency_keys_are_each_users_own(ids_api: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    first: dict[str, tuple[str, str]] = {}
    for key in (bob, alice):  # bob first: he must not be able to use up alice's keys
        written_event = ids_api.post("/memory-events", json=event("k1"), headers=auth(key))
        assert written_event.status_code == 201, written_event.text
        memory = ids_api.post("/memory-candidates", json=candidate(f"{key[-6:]} 的偏好", idempotency_key="k1"),
                              headers=auth(key))
        assert memory.status_code == 201, memory.text
        first[key] = (written_event.json()["event_id"], memory.json()["memory_id"])
    assert first[alice] != first[bob]
    for key in (alice, bob):  # and each replay is the caller's own first result
        assert ids_api.post("/memory-events", json=event("k1"), headers=auth(key)).json()["event_id"] == first[key][0]
        again = ids_api.post("/memory-candidates", json=candidate(f"{key[-6:]} 的偏好", idempotency_key="k1"),
                             headers=auth(key))
        assert again.status_code == 200 and again.json()["memory_id"] == first[key][1]


def test_a_deleted_session_id_is_a_typed_409_for_its_owner_alone(ids_api: TestClient, make_key: MakeKey) -> None:
    """Deleted as the label of events only (no session was opened): reopening it is ``session_deleted``, not a
    404 from a session created and then hidden; another user's s9 is untouched by it."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    assert ids_api.post("/memory-events", json=event("e1", session_id="s9"), headers=auth(alice)).status_code == 201
    gone = ids_api.post("/deletion-requests", json={"deletion_request_id": "d9", "scope": {"type": "session",
                                                                                           "session_id": "s9"}},
                        headers=auth(alice))
    assert gone.status_code == 202, gone.text
    reopened = ids_api.post("/sessions", json={"session_id": "s9"}, headers=auth(alice))
    assert reopened.status_code == 409 and reopened.json()["error"]["code"] == "session_deleted", reopened.text
    assert ids_api.post("/sessions", json={"session_id": "s9"}, headers=auth(bob)).status_code == 201
    wait_for(ids_api, alice, gone.json()["job_id"], completed)
