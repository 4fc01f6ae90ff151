"""Property: what one user does with any ids never changes what another user gets for theirs.

For random ids drawn from a small pool (so the two users' ids collide often), alice writes a session, a
message, an event and a memory under each id; then bob runs a random sequence of requests naming the same ids:
opening sessions, posting messages, events and memories with those keys, and deleting sessions, subjects,
memories and events by them (his own or alice's). After every step alice's view of each of her ids is the same
(reads, windows, and replays of her writes, which stay replays of her first results), a deletion naming what bob
does not own or what is not there is the one 404 of a missing object with nothing written, and at the end alice's
own deletions under the same request ids bob used are accepted."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from tests.conftest import MakeKey, auth
from tests.factories import candidate, event
from tests.ids.conftest import written
from tests.sessions.conftest import say

IDS = st.sampled_from(["s1", "s2", "S1", "a.b:c"]) | st.from_regex(r"\A[ab1][ab1:-]{0,2}\Z")
"""Session ids as the API takes them, from a pool small enough that the two users' ids collide often."""
MOVES = ("open", "message", "event", "memory", "delete_session", "delete_alices_memory", "delete_alices_event",
         "delete_subject_alice")


def _message(sid: str) -> dict[str, Any]:
    return {"messages": [say(f"m-{sid}", "user", f"alice says {sid}")]}


def _alices(api: TestClient, key: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Alice writes under each id; what she got back (her first results, to be replayed later)."""
    mine: dict[str, dict[str, Any]] = {}
    for sid in ids:
        assert api.post("/sessions", json={"session_id": sid}, headers=auth(key)).status_code == 201
        messages = api.post(f"/sessions/{sid}/messages", json=_message(sid), headers=auth(key))
        assert messages.status_code == 201, messages.text
        stored = api.post("/memory-events", json=event(f"e-{sid}", session_id=sid), headers=auth(key))
        memory = api.post("/memory-candidates", json=candidate(f"alice 记得 {sid}", idempotency_key=sid),
                          headers=auth(key))
        assert stored.status_code == 201 and memory.status_code == 201, (stored.text, memory.text)
        mine[sid] = {"message": messages.json()["events"][0]["event_id"], "event": stored.json()["event_id"],
                     "memory": memory.json()["memory_id"]}
    return mine


def _view(api: TestClient, key: str, mine: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Everything alice gets for her ids: reads, the window, and replays of her writes."""
    seen: dict[str, Any] = {}
    for sid, first in mine.items():
        read = api.get(f"/sessions/{sid}", headers=auth(key))
        window = api.get(f"/sessions/{sid}/window", params={"budget_tokens": 300}, headers=auth(key))
        replay = api.post(f"/sessions/{sid}/messages", json=_message(sid), headers=auth(key))
        event_replay = api.post("/memory-events", json=event(f"e-{sid}", session_id=sid), headers=auth(key))
        memory = api.get(f"/memories/{first['memory']}", headers=auth(key))
        memory_replay = api.post("/memory-candidates", json=candidate(f"alice 记得 {sid}", idempotency_key=sid),
                                 headers=auth(key))
        seen[sid] = {
            "read": (read.status_code, read.json().get("session_id"), read.json().get("status")),
            "window": (window.status_code, f"alice says {sid}" in window.text),
            "replay": (replay.status_code, replay.json()["events"][0]["event_id"] == first["message"]),
            "event": (event_replay.status_code, event_replay.json()["event_id"] == first["event"]),
            "memory": (memory.status_code, memory.json().get("content")),
            "memory_replay": (memory_replay.status_code, memory_replay.json()["memory_id"] == first["memory"]),
        }
    return seen


def _deletion(api: TestClient, key: str, request_id: str, scope: dict[str, Any]) -> Any:
    return api.post("/deletion-requests", json={"deletion_request_id": request_id, "scope": scope}, headers=auth(key))


def _refused_as_missing(api: TestClient, engine: Engine, tenant: str, key: str, request_id: str,
                        scope: dict[str, Any]) -> None:
    before = written(engine, tenant)
    refused = _deletion(api, key, request_id, scope)
    assert refused.status_code == 404, refused.text
    assert refused.json()["error"]["code"] == "not_found"
    assert written(engine, tenant) == before


@settings(max_examples=10, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.generate])  # every example runs on the real stack: no shrinking (a failure prints its case)
@given(ids=st.lists(IDS, min_size=1, max_size=2, unique=True),
       moves=st.lists(st.tuples(st.sampled_from(MOVES), IDS), min_size=1, max_size=6))
def test_no_request_of_one_user_changes_what_another_gets_for_their_ids(
    ids_api: TestClient, make_key: MakeKey, engine: Engine, ids: list[str], moves: list[tuple[str, str]]
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    mine = _alices(ids_api, alice, ids)
    expected = _view(ids_api, alice, mine)
    bobs_sessions: set[str] = set()  # ids under which bob has something no deletion covered
    bobs_opened: set[str] = set()  # ... and those of them he opened as sessions
    deleted: set[str] = set()
    used_request_ids: list[str] = []
    for move, sid in moves:
        if sid in deleted:
            continue  # bob's own deleted ids answer for bob alone; they are not what this property is about
        request_id = f"r-{sid}"
        if move == "open":
            opened = ids_api.post("/sessions", json={"session_id": sid}, headers=auth(bob))
            assert opened.status_code in (200, 201), opened.text  # never another's: never a 409
            bobs_sessions.add(sid)
            bobs_opened.add(sid)
        elif move == "message":
            posted = ids_api.post(f"/sessions/{sid}/messages", json={"messages": [say(f"m-{sid}", "user", "bob")]},
                                  headers=auth(bob))
            assert posted.status_code in ((200, 201) if sid in bobs_opened else (404,)), posted.text
        elif move == "event":
            stored = ids_api.post("/memory-events", json=event(f"e-{sid}", session_id=sid, payload={"text": "bob"}),
                                  headers=auth(bob))
            assert stored.status_code in (200, 201), stored.text
            bobs_sessions.add(sid)
        elif move == "memory":
            memory = ids_api.post("/memory-candidates", json=candidate("bob 记得", idempotency_key=sid),
                                  headers=auth(bob))
            assert memory.status_code in (200, 201), memory.text
        elif move == "delete_session":
            scope = {"type": "session", "session_id": sid}
            if sid in bobs_sessions:
                accepted = _deletion(ids_api, bob, request_id, scope)
                assert accepted.status_code == 202, accepted.text
                used_request_ids.append(request_id)
                deleted.add(sid)
            else:
                _refused_as_missing(ids_api, engine, tenant, bob, request_id, scope)
        elif move == "delete_subject_alice":
            refused = _deletion(ids_api, bob, request_id, {"type": "subject", "user_id": "alice"})
            assert refused.status_code == 403, refused.text  # a role question, asked of anyone named
        else:
            target = mine.get(sid) or next(iter(mine.values()))
            if move == "delete_alices_memory":
                _refused_as_missing(ids_api, engine, tenant, bob, request_id,
                                    {"type": "memory", "memory_id": target["memory"]})
                assert ids_api.delete(f"/memories/{target['memory']}", headers=auth(bob)).status_code == 404
            else:
                _refused_as_missing(ids_api, engine, tenant, bob, request_id,
                                    {"type": "event", "event_id": target["event"]})
        assert _view(ids_api, alice, mine) == expected, (move, sid)
    # Alice's own deletion under a request id bob used, and the default id of her DELETE, are hers.
    request_id = used_request_ids[0] if used_request_ids else f"r-{ids[0]}"
    accepted = _deletion(ids_api, alice, request_id, {"type": "session", "session_id": ids[0]})
    assert accepted.status_code == 202, accepted.text
    assert ids_api.delete(f"/memories/{mine[ids[-1]]['memory']}", headers=auth(alice)).status_code == 202
