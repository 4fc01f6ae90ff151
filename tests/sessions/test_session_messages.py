"""Sessions and their messages over the real API and PostgreSQL: idempotent, numbered, paired, isolated."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth


def _msg(key: str, role: str = "user", content: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"idempotency_key": key, "role": role, "content": content, "created_at": "2026-07-14T14:00:00+08:00",
            **extra}


def test_a_session_is_idempotent_by_its_id_and_belongs_to_its_user(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant), make_key(tenant=tenant, user="bob")
    body = {"session_id": "s-500", "task_id": "task-1001", "title": "monthly report"}
    first = client.post("/sessions", json=body, headers=auth(alice))
    assert first.status_code == 201 and first.json() == {"session_id": "s-500", "status": "active", "replayed": False}
    again = client.post("/sessions", json=body, headers=auth(alice))
    assert again.status_code == 200 and again.json()["replayed"] is True
    other_body = client.post("/sessions", json={**body, "title": "another"}, headers=auth(alice))
    assert other_body.status_code == 409 and other_body.json()["error"]["code"] == "idempotency_conflict"
    # Session ids are each user's own: bob's s-500 is his, and neither learns of the other's.
    assert client.post("/sessions", json=body, headers=auth(bob)).json()["replayed"] is False
    assert client.post("/sessions", json=body, headers=auth(make_key())).status_code == 201  # another tenant
    generated = client.post("/sessions", json={}, headers=auth(alice)).json()["session_id"]
    assert generated.startswith("s-") and generated != "s-500"
    bad = client.post("/sessions", json={"session_id": "a/b"}, headers=auth(alice))
    assert bad.status_code == 422


def test_messages_are_numbered_in_order_and_a_replay_returns_the_first_result(
    client: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    client.post("/sessions", json={"session_id": "s-1"}, headers=auth(key))
    batch = {"messages": [_msg("m1", content="继续上次报告"), _msg("m2", role="assistant", content="好的")]}
    first = client.post("/sessions/s-1/messages", json=batch, headers=auth(key))
    assert first.status_code == 201, first.text
    body = first.json()
    assert [e["sequence_no"] for e in body["events"]] == [1, 2]
    assert body["sequence_range"] == {"from": 1, "to": 2}
    replay = client.post("/sessions/s-1/messages", json=batch, headers=auth(key))
    assert replay.status_code == 200
    assert [e["event_id"] for e in replay.json()["events"]] == [e["event_id"] for e in body["events"]]
    assert all(e["replayed"] for e in replay.json()["events"])
    mixed = client.post("/sessions/s-1/messages", json={"messages": [batch["messages"][1], _msg("m3")]},
                        headers=auth(key))
    assert mixed.status_code == 201
    assert [(e["sequence_no"], e["replayed"]) for e in mixed.json()["events"]] == [(2, True), (3, False)]
    changed = client.post("/sessions/s-1/messages", json={"messages": [_msg("m4"), _msg("m1", content="other")]},
                          headers=auth(key))
    assert changed.status_code == 409 and changed.json()["error"]["code"] == "idempotency_conflict"
    after = client.post("/sessions/s-1/messages", json={"messages": [_msg("m5")]}, headers=auth(key))
    assert after.json()["events"][0]["sequence_no"] == 4  # m4 was not stored: the whole batch was refused


def test_a_tool_result_must_answer_an_earlier_call_of_the_session(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    client.post("/sessions", json={"session_id": "s-tools"}, headers=auth(key))
    orphan = client.post("/sessions/s-tools/messages", json={"messages": [
        _msg("t0", content="hi"), _msg("t1", role="tool", content="42", tool_call_id="call-9"),
    ]}, headers=auth(key))
    assert orphan.status_code == 422 and orphan.json()["error"]["code"] == "unknown_tool_call"
    call = _msg("t2", role="assistant", content="", tool_calls=[{"id": "call-1", "name": "sales", "arguments": "{}"}])
    same_batch = client.post("/sessions/s-tools/messages", json={"messages": [
        call, _msg("t3", role="tool", content="1,234", tool_call_id="call-1"),
    ]}, headers=auth(key))
    assert same_batch.status_code == 201
    assert [e["sequence_no"] for e in same_batch.json()["events"]] == [1, 2]  # the refused batch left nothing
    later = client.post("/sessions/s-tools/messages", json={"messages": [
        _msg("t4", role="tool", content="again", tool_call_id="call-1"),
    ]}, headers=auth(key))
    assert later.status_code == 201
    stray = client.post("/sessions/s-tools/messages", json={"messages": [_msg("t5", tool_call_id="call-1")]},
                        headers=auth(key))
    assert stray.status_code == 422 and stray.json()["error"]["code"] == "tool_call_id_not_allowed"


def test_another_users_session_is_a_404_and_batches_are_bounded(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant), make_key(tenant=tenant, user="bob")
    client.post("/sessions", json={"session_id": "s-a"}, headers=auth(alice))
    theirs = client.post("/sessions/s-a/messages", json={"messages": [_msg("b1")]}, headers=auth(bob))
    missing = client.post("/sessions/s-none/messages", json={"messages": [_msg("b2")]}, headers=auth(bob))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
    too_many = {"messages": [_msg(f"x{i}") for i in range(501)]}
    assert client.post("/sessions/s-a/messages", json=too_many, headers=auth(alice)).status_code == 422
