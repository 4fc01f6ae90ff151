"""POST /memory-events:batch and POST /memory-candidates:batch: per item what the single route answers, one
transaction, a bad item is its own error and leaves nothing behind, idempotency shared with the single routes."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.routers.memories import _item
from api.schemas.memories import CandidateIn
from memory.db import global_session, tenant_session
from memory.identity.auth import authenticate
from memory.store.batches import MAX_BATCH_ITEMS
from memory.store.memories import create_memory
from tests.conftest import MakeKey, auth
from tests.factories import candidate, event

TABLES = ("memory_events", "memories", "memory_search", "memory_lexemes", "audit_log")


def _rows(engine: Engine, tenant: str) -> dict[str, int]:
    """How many rows of the tenant every table a write touches holds."""
    with tenant_session(engine, tenant) as session:
        return {table: int(session.execute(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"),
                                           {"t": tenant}).scalar_one()) for table in TABLES}


def _cite(event_id: str, content: str, **fields: Any) -> dict[str, Any]:
    return candidate(content, source={"source_id": f"event:{event_id}", "source_type": "MESSAGE",
                                      "captured_at": "2026-06-01T09:00:00Z"}, **fields)


def test_events_per_item_committed_replayed_and_refused(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    single = client.post("/memory-events", json=event("before"), headers=auth(key)).json()
    items = [event("a"), {"kind": "MESSAGE"}, event("before"), event("before", kind="TOOL_RESULT"), event("a"),
             event("a", kind="TOOL_RESULT"), {**event("b"), "user_id": "mallory"}]
    answer = client.post("/memory-events:batch", json={"items": items}, headers=auth(key))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    results = body["results"]
    assert [r["index"] for r in results] == list(range(len(items)))
    assert [r["outcome"] for r in results] == ["committed", "error", "replayed", "error", "replayed", "error",
                                               "error"]
    assert (body["committed"], body["replayed"], body["errors"]) == (1, 2, 4)
    assert results[1]["error"]["code"] == "missing_field" and "event_id" not in results[1]
    assert results[2]["event_id"] == single["event_id"] and results[2]["revision"] == single["revision"]
    assert results[3]["error"]["code"] == "idempotency_conflict"
    assert results[3]["error"]["details"]["event_id"] == single["event_id"]
    assert results[4]["event_id"] == results[0]["event_id"]  # the same key later in the batch: as if sent in order
    assert results[5]["error"]["code"] == "idempotency_conflict"
    assert results[6]["error"]["code"] == "identity_from_credentials"  # identity comes from the key alone
    replay = client.post("/memory-events", json=event("a"), headers=auth(key))
    assert replay.status_code == 200 and replay.json()["event_id"] == results[0]["event_id"]


def test_a_bad_memory_between_good_ones_leaves_nothing_of_itself(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key, stranger = make_key(tenant=tenant), make_key()
    said = client.post("/memory-events:batch", json={"items": [event("m-1"), event("m-2")]}, headers=auth(key)).json()
    ids = [r["event_id"] for r in said["results"]]
    theirs = client.post("/memory-events", json=event("x"), headers=auth(stranger)).json()["event_id"]
    before = _rows(engine, tenant)
    items = [
        _cite(ids[0], "我住在杭州 第一条", idempotency_key="k-1"),
        _cite(ids[1], "错误的空间 坏条目", space="AGENT"),  # a PROFILE belongs in USER space: the store refuses it
        _cite(theirs, "别人的事件 坏条目"),  # another tenant's event is no event
        {**candidate("坏条目"), "colour": "red"},
        _cite(ids[1], "我喜欢乌龙茶 第二条", category="PREFERENCE"),
        _cite(ids[0], "我住在杭州 第一条", idempotency_key="k-1"),
    ]
    answer = client.post("/memory-candidates:batch", json={"items": items}, headers=auth(key))
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["outcome"] for r in results] == ["committed", "error", "error", "error", "committed", "replayed"]
    assert [r["error"]["code"] for r in results[1:4]] == ["category_space_mismatch", "unknown_source_event",
                                                          "unknown_field"]
    assert results[5]["memory_id"] == results[0]["memory_id"]
    assert (results[0]["status"], results[0]["stage"], results[0]["indexes"]) == (
        "ACTIVE", "searchable", {"lexical": "indexed", "vector": "pending"})
    after = _rows(engine, tenant)
    assert {t: after[t] - before[t] for t in ("memories", "memory_search", "audit_log")} == {
        "memories": 2, "memory_search": 2, "audit_log": 0}
    with tenant_session(engine, tenant) as session:
        stored = {str(m) for m in session.execute(text("SELECT memory_id FROM memories")).scalars()}
        posted = {str(m) for m in session.execute(text("SELECT DISTINCT memory_id FROM memory_lexemes")).scalars()}
        bad = session.execute(text("SELECT count(*) FROM memory_search WHERE search_text LIKE '%坏条目%'")).scalar()
    assert stored == posted == {results[0]["memory_id"], results[4]["memory_id"]} and bad == 0
    found = client.post("/memory-query", json={"query": "乌龙茶"}, headers=auth(key)).json()
    assert [m["memory_id"] for m in found["items"]] == [results[4]["memory_id"]]  # searchable at once


def test_idempotency_is_shared_with_the_single_route(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    first = client.post("/memory-candidates", json=candidate("单条写入", idempotency_key="s-1"), headers=auth(key))
    batch = client.post("/memory-candidates:batch", headers=auth(key), json={"items": [
        candidate("单条写入", idempotency_key="s-1"), candidate("批量写入", idempotency_key="b-1"),
        candidate("另一内容", idempotency_key="s-1")]}).json()["results"]
    assert [r["outcome"] for r in batch] == ["replayed", "committed", "error"]
    assert batch[0]["memory_id"] == first.json()["memory_id"] and batch[2]["error"]["code"] == "idempotency_conflict"
    again = client.post("/memory-candidates", json=candidate("批量写入", idempotency_key="b-1"), headers=auth(key))
    assert again.status_code == 200 and again.json()["memory_id"] == batch[1]["memory_id"]
    unknown = client.post("/memory-candidates", json=_cite(str(uuid.uuid4()), "无源"), headers=auth(key))
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "unknown_source_event"


def test_whole_request_problems_refuse_the_whole_batch(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    many = [event(f"e-{n}") for n in range(MAX_BATCH_ITEMS + 1)]
    for path, body, status, code in [
        ("/memory-events:batch", {"items": many}, 422, "batch_too_large"),
        ("/memory-candidates:batch", {"items": []}, 422, "invalid_value"),
        ("/memory-events:batch", {"items": many[:2], "tenant_id": "other"}, 422, "identity_from_credentials"),
        ("/memory-events:batch", [event("e-1")], 422, "invalid_value"),
    ]:
        refused = client.post(path, json=body, headers=auth(key))
        assert (refused.status_code, refused.json()["error"]["code"]) == (status, code), refused.text
    assert client.post("/memory-events:batch", json={"items": many[:2]}).status_code == 401
    assert client.post("/memory-events:batch", json={"items": many[:MAX_BATCH_ITEMS]},
                       headers=auth(key)).json()["committed"] == MAX_BATCH_ITEMS
    assert _rows(engine, tenant)["memory_events"] == MAX_BATCH_ITEMS


def test_a_batch_holds_the_write_slots_of_as_many_writes(client: TestClient, make_key: MakeKey) -> None:
    """Admission (api/admission.py): a batch of N items takes the slots N writes in flight would."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    writes = client.app.state.admission.limiters["write"]  # type: ignore[attr-defined]
    assert writes.limit >= 2
    with writes.slot(tenant):  # one write of the tenant in flight
        full = client.post("/memory-events:batch", json={"items": [event(f"w-{n}") for n in range(writes.limit)]},
                           headers=auth(key))
        assert full.status_code == 429 and full.json()["error"]["code"] == "tenant_busy", full.text
        fits = client.post("/memory-events:batch", json={"items": [event(f"w-{n}") for n in range(writes.limit - 1)]},
                           headers=auth(key))
        assert fits.status_code == 200 and fits.json()["committed"] == writes.limit - 1


def test_a_batch_racing_an_uncommitted_write_of_the_same_key_replays_it(
    client: TestClient, make_key: MakeKey, engine: Engine,
) -> None:
    """A retry sent while the first request is still committing (a client timeout, an import re-run, another API
    replica) looks its keys up before that commit, then meets the row at the unique index: it waits, and its item
    is a replay of the first request's memory (a different body, a conflict), never a 500 losing the batch."""
    key = make_key()
    first_body = candidate("The racing memory", idempotency_key="race")
    other_body = candidate("Another memory of the same batch", idempotency_key="race-other")
    with global_session(engine) as session:
        principal = authenticate(session, key)
    first, digest = _item(CandidateIn.model_validate(first_body))
    with tenant_session(engine, principal.tenant_id) as holding:
        racer = create_memory(holding, principal, first, digest).memory.memory_id  # not committed yet
        answers: list[Any] = []
        retry = threading.Thread(target=lambda: answers.append(client.post(
            "/memory-candidates:batch", json={"items": [other_body, first_body,
                                                        {**first_body, "content": "changed"}]}, headers=auth(key))))
        retry.start()
        deadline = time.monotonic() + 30
        with engine.connect() as watcher:  # the batch waits on the unique index behind this transaction
            while not watcher.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar_one():
                assert time.monotonic() < deadline, "the batch never reached the unique index"
                time.sleep(0.05)
    retry.join(30)
    [answer] = answers
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["outcome"] for r in results] == ["committed", "replayed", "error"]
    assert results[1]["memory_id"] == str(racer) and results[2]["error"]["code"] == "idempotency_conflict"
    assert _rows(engine, principal.tenant_id)["memories"] == 2
    with tenant_session(engine, principal.tenant_id) as session:  # the replayed item wrote no projection twice
        assert session.execute(text("SELECT count(*) FROM memory_search")).scalar_one() == 2
