"""Deletion through the API against the real stack: barrier at once, verified purge, idempotency."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select, text

from memory.db import tenant_session
from memory.enums import Category, SourceLevel, Space
from memory.epochs import StaleEpoch, current_epoch
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry, Memory, MemoryEvent, MemoryLexeme, MemorySearch, RebuildBlock
from memory.store.memories import NewMemory, Source, create_memory
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate, event, message_candidate


def _write(api: TestClient, key: str, content: str, **overrides: Any) -> str:
    response = api.post("/memory-candidates", json=candidate(content, **overrides), headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


def _recall(api: TestClient, key: str, query: str, **extra: Any) -> list[str]:
    response = api.post("/memory-query", json={"query": query, **extra}, headers=auth(key))
    assert response.status_code == 200, response.text
    return [item["memory_id"] for item in response.json()["items"]]


def _tenant_of(key: str, engine: Engine) -> str:
    key_id = key.split("_")[1]
    with engine.connect() as connection:
        found = connection.execute(text("SELECT tenant_id FROM api_keys WHERE key_id = :k"), {"k": key_id})
        return str(found.scalar_one())


def test_the_barrier_holds_from_the_very_next_request(api: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    target = _write(api, alice, "我住在上海市静安区。周末常去苏州河边跑步")
    bystander = _write(api, bob, "我住在上海市静安区。周末常去苏州河边跑步")
    assert _recall(api, alice, "上海市静安区") == [target]

    accepted = api.delete(f"/memories/{target}", headers=auth(alice))
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["barrier"] == "committed"
    # The very next requests: the target is gone from every read path, the bystander is not.
    for method, url, body in (
        ("GET", f"/memories/{target}", None),
        ("GET", f"/memories/{target}?version=1", None),
        ("PATCH", f"/memories/{target}", {"expected_version": 1, "content": "我住在上海"}),
        ("POST", f"/memories/{target}/expire", None),
        ("POST", f"/memory-candidates/{target}/confirm", None),
    ):
        assert api.request(method, url, json=body, headers=auth(alice)).status_code == 404, (method, url)
    for phrasing in ("上海市静安区", "静安区 上海", "ＳＵ州河 跑步", "苏州河边跑步", "周末常去苏州河"):
        assert _recall(api, alice, phrasing) == [], phrasing
    assert _recall(api, bob, "上海市静安区") == [bystander]

    job = wait_for(api, alice, accepted.json()["job_id"], completed)
    assert job["fully_deleted"] is True
    assert job["remaining_copies"] == []
    layers = {layer["layer"]: layer for layer in job["layers"]}
    assert all(layer["status"] == "done" for layer in layers.values())
    assert layers["primary_memories"]["removed"] == 1
    assert layers["search_projection"]["removed"] == 1
    assert layers["verification_probes"]["removed"] >= 2
    with tenant_session(engine, tenant) as session:
        rows = session.execute(select(Memory).where(Memory.memory_id == uuid.UUID(target))).scalars().all()
        assert [(r.content, r.abstract, r.status) for r in rows] == [("", "", "DELETED")]
        assert session.execute(select(MemorySearch).where(MemorySearch.memory_id == uuid.UUID(target))).first() is None
        assert session.execute(text("SELECT count(*) FROM deletion_probes")).scalar_one() == 0


def test_a_repeat_returns_the_same_job_and_bumps_the_epoch_once(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    key = make_key()
    target = _write(api, key, "重复删除测试")
    request = {"deletion_request_id": "del-1", "scope": {"type": "memory", "memory_id": target}}
    first = api.post("/deletion-requests", json=request, headers=auth(key))
    wait_for(api, key, first.json()["job_id"], completed)
    again = api.post("/deletion-requests", json=request, headers=auth(key))
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["job_id"] == first.json()["job_id"]
    assert again.json()["status"] == "completed"
    with tenant_session(engine, _tenant_of(key, engine)) as session:
        assert current_epoch(session, _tenant_of(key, engine), "alice") == 1
    other = api.post(
        "/deletion-requests", json={**request, "scope": {"type": "subject"}}, headers=auth(key)
    )
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"


def test_subject_deletion_purges_every_layer_and_later_writes_are_new_data(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, admin = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="root", roles=("admin",))
    ids = [_write(api, alice, f"爱丽丝的私事 第{n}条") for n in range(16)]
    _write(api, alice, "会话里的私事", space="SESSION", session_id="s-1")
    api.patch(
        f"/memories/{ids[0]}", json={"expected_version": 1, "content": "爱丽丝的私事 改正版"}, headers=auth(alice)
    )
    for n in range(3):
        api.post("/memory-events", json=event(f"e-{n}"), headers=auth(alice))

    forbidden = api.post(
        "/deletion-requests",
        json={"deletion_request_id": "x", "scope": {"type": "subject", "user_id": "root"}},
        headers=auth(alice),
    )
    assert forbidden.status_code == 403
    accepted = api.post(
        "/deletion-requests",
        json={"deletion_request_id": "gdpr-alice", "scope": {"type": "subject", "user_id": "alice"}},
        headers=auth(admin),
    )
    assert accepted.status_code == 202, accepted.text
    # An admin deleted her: her keys went with her data, at once (they no longer read or write about her).
    assert api.post("/memory-query", json={"query": "爱丽丝的私事"}, headers=auth(alice)).status_code == 401
    body = wait_for(api, admin, accepted.json()["job_id"], completed)
    layers = {layer["layer"]: layer for layer in body["layers"]}
    assert layers["primary_memories"]["removed"] == 18  # 16 + 1 session memory + 1 superseded version
    assert layers["source_events"]["removed"] == 3
    assert layers["search_projection"]["removed"] == 17
    assert layers["search_projection"]["evidence"]["lexeme_postings"] >= 17 * 4  # 私事, 第n, n条, … per memory
    with tenant_session(engine, tenant) as session:
        leftovers = session.execute(
            select(Memory.memory_id).where(Memory.owner_id == "alice", Memory.content != "")
        ).all()
        assert leftovers == []
        assert session.execute(select(func.count()).select_from(MemoryLexeme)).scalar_one() == 0
        payloads = session.execute(select(MemoryEvent.payload).where(MemoryEvent.user_id == "alice")).scalars().all()
        assert payloads == [{}] * 3

    refused = api.post("/memory-candidates", json=candidate("删除之后用旧钥匙写的"), headers=auth(alice))
    assert refused.status_code == 401, refused.text
    with tenant_session(engine, tenant) as session:
        audited = session.execute(select(AuditEntry.detail).where(AuditEntry.action == "KEY_REVOKED")).scalars().all()
    assert [detail.get("reason") for detail in audited] == ["subject deletion gdpr-alice"]
    alice = make_key(tenant=tenant, user="alice")  # a key issued afterwards writes new data
    fresh = _write(api, alice, "删除之后的新记忆")
    assert _recall(api, alice, "新记忆") == [fresh]


def test_derived_memories_are_deleted_or_rederived_and_source_events_marked(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    source_event = api.post("/memory-events", json=event("src"), headers=auth(key)).json()["event_id"]
    base = candidate("用户住在上海", source={"source_id": f"event:{source_event}", "source_type": "EVENT",
                                            "captured_at": "2026-06-01T09:00:00Z"})
    target = api.post("/memory-candidates", json=base, headers=auth(key)).json()["memory_id"]
    only_from_target = _write(api, key, "摘要：用户住在上海")
    also_elsewhere = _write(api, key, "摘要：用户常驻华东")
    with tenant_session(engine, tenant) as session:
        session.execute(
            text("UPDATE memories SET evidence_refs = CAST(:refs AS jsonb) WHERE memory_id = :id"),
            [
                {"refs": f'["memory:{target}"]', "id": only_from_target},
                {"refs": f'["memory:{target}", "doc:handbook"]', "id": also_elsewhere},
            ],
        )
    accepted = api.delete(f"/memories/{target}", headers=auth(key)).json()
    body = wait_for(api, key, accepted["job_id"], completed)
    derived = next(layer for layer in body["layers"] if layer["layer"] == "derived_memories")
    assert (derived["evidence"]["derived_deleted"], derived["evidence"]["derived_rederived"]) == (1, 1)
    assert api.get(f"/memories/{only_from_target}", headers=auth(key)).status_code == 404
    rederived = api.get(f"/memories/{also_elsewhere}", headers=auth(key)).json()
    assert (rederived["version"], rederived["status"]) == (2, "CANDIDATE")
    assert rederived["source"]["evidence_refs"] == ["doc:handbook"]
    with tenant_session(engine, tenant) as session:
        blocks = session.execute(select(RebuildBlock.event_id, RebuildBlock.memory_id)).all()
    assert [(str(e), str(m)) for e, m in blocks] == [(source_event, target)]


def test_a_writer_holding_an_old_epoch_cannot_write_back(api: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant, user="carol")
    other_key = make_key(tenant=tenant, user="carol")
    _write(api, key, "卡罗尔的旧记忆")
    with tenant_session(engine, tenant) as session:
        held = current_epoch(session, tenant, "carol")  # e.g. an extraction activity starting now
    accepted = api.post(
        "/deletion-requests", json={"deletion_request_id": "carol-all", "scope": {"type": "subject"}}, headers=auth(key)
    ).json()
    carol = PrincipalContext(tenant, "carol", None, frozenset({"memory_writer"}), "activity")
    late = NewMemory(
        category=Category.PROFILE,
        space=Space.USER,
        content="卡罗尔的旧记忆（由延迟的提取任务写回）",
        source=Source("extraction", "MODEL_EXTRACTION", datetime(2026, 6, 1, tzinfo=UTC)),
        source_level=SourceLevel.E2,
    )
    with pytest.raises(StaleEpoch) as refused, tenant_session(engine, tenant) as session:
        create_memory(session, carol, late, held_epoch=held)
    assert refused.value.details == {"held_epoch": held, "current_epoch": held + 1}
    # Deleting herself, carol keeps the key she asked with (to follow the job); her other keys are revoked.
    wait_for(api, key, accepted["job_id"], completed)
    assert _recall(api, key, "卡罗尔") == []
    assert api.post("/memory-query", json={"query": "卡罗尔"}, headers=auth(other_key)).status_code == 401


def test_expire_revise_and_delete_are_different_operations(api: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    a, b, c = (_write(api, key, f"三种操作 {n}") for n in "abc")
    expired = api.post(f"/memories/{a}/expire", headers=auth(key))
    revised = api.patch(f"/memories/{b}", json={"expected_version": 1, "content": "三种操作 b2"}, headers=auth(key))
    deleted = api.delete(f"/memories/{c}", headers=auth(key))
    assert (expired.status_code, revised.status_code, deleted.status_code) == (200, 200, 202)
    assert (expired.json()["status"], expired.json()["version"]) == ("EXPIRED", 1)
    assert (revised.json()["status"], revised.json()["version"]) == ("ACTIVE", 2)
    assert set(deleted.json()) >= {"job_id", "status"}
    assert api.get(f"/memories/{a}", headers=auth(key)).json()["status"] == "EXPIRED"
    assert _recall(api, key, "三种操作") == [b]
    wait_for(api, key, deleted.json()["job_id"], completed)
    with tenant_session(engine, tenant) as session:
        actions = (
            session.execute(text("SELECT action FROM audit_log WHERE memory_id IS NOT NULL ORDER BY audit_id"))
            .scalars()
            .all()
        )
    assert actions == ["MEMORY_EXPIRED", "MEMORY_REVISED", "DELETION_REQUESTED"]


def test_another_tenants_memory_or_job_is_a_plain_404(api: TestClient, make_key: MakeKey) -> None:
    owner, stranger = make_key(roles=("admin",)), make_key(roles=("admin",))
    target = _write(api, owner, "别人的记忆")
    assert api.delete(f"/memories/{target}", headers=auth(stranger)).status_code == 404
    job = api.delete(f"/memories/{target}", headers=auth(owner)).json()["job_id"]
    assert api.get(f"/memory-deletions/{job}", headers=auth(stranger)).status_code == 404
    assert api.get(f"/memory-deletions/{uuid.uuid4()}", headers=auth(stranger)).status_code == 404
    wait_for(api, owner, job, completed)


def test_a_colleague_cannot_delete_my_memory(api: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    mine, theirs = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    target = _write(api, mine, "只有我能删")
    assert api.delete(f"/memories/{target}", headers=auth(theirs)).status_code == 404
    assert _recall(api, mine, "只有我能删") == [target]


def test_a_deletion_request_id_is_its_requesters_own(api: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    target = _write(api, alice, "爱丽丝的私人记录")
    accepted = api.delete(f"/memories/{target}", headers=auth(alice)).json()
    job = accepted["job_id"]
    wait_for(api, alice, job, completed)
    # Bob neither gets Alice's job nor learns that her memory existed; her request id, used by him, is his own.
    assert api.delete(f"/memories/{target}", headers=auth(bob)).status_code == 404
    reused = api.post(
        "/deletion-requests",
        json={"deletion_request_id": accepted["deletion_request_id"],
              "scope": {"type": "memory", "memory_id": _write(api, bob, "bob 的笔记")}},
        headers=auth(bob),
    )
    assert reused.status_code == 202, reused.text
    assert reused.json()["job_id"] != job
    assert api.delete(f"/memories/{target}", headers=auth(alice)).json()["job_id"] == job
    wait_for(api, bob, reused.json()["job_id"], completed)


def test_postings_left_without_their_search_row_are_purged_too(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    memory_id = _write(api, key, "The locker combination is 4711")
    with tenant_session(engine, tenant) as session:  # as a projection write racing an earlier purge leaves them
        session.execute(text("DELETE FROM memory_search WHERE memory_id = :id"), {"id": memory_id})
        assert session.execute(select(func.count()).select_from(MemoryLexeme)).scalar_one() > 0
    body = wait_for(api, key, api.delete(f"/memories/{memory_id}", headers=auth(key)).json()["job_id"], completed)
    layer = next(layer for layer in body["layers"] if layer["layer"] == "search_projection")
    assert layer["evidence"]["lexical_rows"] == 0 and layer["evidence"]["lexeme_postings"] > 0
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(func.count()).select_from(MemoryLexeme)).scalar_one() == 0


def test_a_reply_is_purged_with_where_its_quote_began(api: TestClient, make_key: MakeKey, engine: Engine) -> None:
    """The quote's offset points into the content: purging the content scrubs it too (the database refuses an
    offset outside the content, so a purge that kept it would fail)."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice = make_key(tenant=tenant, user="alice")
    reply = {"speaker": "Alice", "text": "Yes, twice", "replying_to": {"speaker": "Bob", "text": "Been to Lisbon?"}}
    written = api.post("/memory-candidates", json=message_candidate(reply), headers=auth(alice))
    assert written.status_code == 201, written.text
    target = written.json()["memory_id"]
    accepted = api.delete(f"/memories/{target}", headers=auth(alice))
    assert accepted.status_code == 202, accepted.text
    wait_for(api, alice, accepted.json()["job_id"], completed)
    with tenant_session(engine, tenant) as session:
        row = session.execute(select(Memory).where(Memory.memory_id == uuid.UUID(target))).scalar_one()
        assert (row.content, row.quote_start, row.purged_at is not None) == ("", None, True)
