"""POST /memory-events: idempotent by (tenant, user, idempotency key)."""

import uuid

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.factories import event


def test_replay_returns_the_first_result(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    first = client.post("/memory-events", json=event("evt-1"), headers=auth(key))
    assert first.status_code == 201, first.text
    again = client.post("/memory-events", json=event("evt-1"), headers=auth(key))
    assert again.status_code == 200
    assert again.json()["event_id"] == first.json()["event_id"]
    assert again.json()["revision"] == first.json()["revision"]
    assert (first.json()["replayed"], again.json()["replayed"]) == (False, True)
    assert first.json()["stage"] == "committed"


def test_replay_with_a_different_body_is_a_conflict(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    first = client.post("/memory-events", json=event("evt-2"), headers=auth(key))
    other = client.post(
        "/memory-events", json=event("evt-2", payload={"role": "user", "text": "something else"}), headers=auth(key)
    )
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"
    assert other.json()["error"]["details"]["event_id"] == first.json()["event_id"]


def test_idempotency_keys_are_per_tenant(client: TestClient, make_key: MakeKey) -> None:
    a, b = make_key(), make_key()
    first = client.post("/memory-events", json=event("shared-key"), headers=auth(a))
    second = client.post("/memory-events", json=event("shared-key", kind="TOOL_RESULT"), headers=auth(b))
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["event_id"] != second.json()["event_id"]


def test_unknown_event_kind_is_rejected(client: TestClient, make_key: MakeKey) -> None:
    response = client.post("/memory-events", json=event("evt-3", kind="GOSSIP"), headers=auth(make_key()))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_value"


def test_another_users_equal_key_is_another_key(client: TestClient, make_key: MakeKey) -> None:
    """Idempotency keys are each user's own: bob's "taken" neither collides with alice's nor tells him of it."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    first = client.post("/memory-events", json=event("taken"), headers=auth(alice)).json()
    bobs = client.post("/memory-events", json=event("taken", kind="TOOL_RESULT"), headers=auth(bob))
    assert bobs.status_code == 201 and bobs.json()["event_id"] != first["event_id"]
    replay = client.post("/memory-events", json=event("taken"), headers=auth(alice))
    assert replay.status_code == 200 and replay.json()["event_id"] == first["event_id"]
