"""search through the real app and PostgreSQL: the field whitelist before matching, the re-read from the source,
one deterministic ranker, dedupe by ref, top_k, the byte budget, forgotten records and the public catalog."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from memory.db import tenant_session
from tests.conftest import MakeKey, auth
from tests.resources.reader_support import agent_access, error, new_key, put, reader, search, tenant


def test_a_keyword_only_in_a_forbidden_field_never_makes_a_candidate(client: TestClient, make_key: MakeKey) -> None:
    """Seed 000 §3.2: agent A reads /title and /status, agent B also /notes."""
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    put(client, key, "todo:push", {"title": "更新推送配置", "status": "open", "notes": "联系人电话 13800001111 内部"})
    put(client, key, "todo:other", {"title": "整理周报", "status": "open"})
    agent_a = agent_access(tenant_id, "alice", "agent-a", {"todo": ("/title", "/status")})
    agent_b = agent_access(tenant_id, "alice", "agent-b", {"todo": ("/title", "/status", "/notes")})
    the_reader = reader(client)

    assert the_reader.search(agent_a, "13800001111", None, None).items == []
    assert the_reader.search(agent_a, "电话 内部", "todo", None).items == []
    hits_b = the_reader.search(agent_b, "13800001111", None, None).items
    assert [hit.ref for hit in hits_b] == ["todo:push"]
    assert "13800001111" in hits_b[0].snippet
    # A matches the title and sees nothing of the notes, in the snippet or anywhere in the hit.
    hits_a = the_reader.search(agent_a, "推送配置 13800001111", None, None).items
    assert [hit.ref for hit in hits_a] == ["todo:push"]
    assert "1380000" not in hits_a[0].model_dump_json()
    # Its lexical score counts only the readable terms: B, who reads both, scores higher on the same query.
    assert the_reader.search(agent_b, "推送配置 13800001111", None, None).items[0].score > hits_a[0].score


def test_a_todo_completed_after_indexing_is_reported_done_and_ranked_below_open_ones(
    client: TestClient, make_key: MakeKey, engine: Engine,
) -> None:
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    put(client, key, "todo:open", {"title": "提醒补发 design review", "status": "open"})  # the oldest
    put(client, key, "todo:first", {"title": "提醒补发 design review", "status": "open"})
    put(client, key, "todo:second", {"title": "提醒补发 design review", "status": "open"})
    before = search(client, key, query="提醒补发 review", resource="todo")["items"]
    assert {hit["ref"]: hit["state"] for hit in before} == {"todo:open": "open", "todo:first": "open",
                                                            "todo:second": "open"}

    # Completed through the API (its projection rewritten in the same transaction) ...
    put(client, key, "todo:first", {"title": "提醒补发 design review", "status": "done"}, version=1)
    # ... and the other completed behind the projection's back: only its source row says so.
    with tenant_session(engine, tenant_id) as session:
        session.execute(text("UPDATE resource_records SET data = jsonb_set(data, '{status}', '\"done\"'), "
                             "version = version + 1 WHERE tenant_id = :t AND record_id = 'second'"), {"t": tenant_id})
    after = search(client, key, query="提醒补发 review")["items"]
    # Both completed ones changed after the open one, and still rank below it: state outweighs recency.
    assert [(hit["ref"], hit["state"]) for hit in after] == [
        ("todo:open", "open"), ("todo:first", "closed"), ("todo:second", "closed")]
    assert after[2]["version"] == 2
    # One deterministic ranker: the same rows give the same order and scores.
    assert search(client, key, query="提醒补发 review")["items"][:1] == after[:1]


def test_a_confirmed_event_is_no_work_left_and_does_not_outrank_its_meeting(
    client: TestClient, make_key: MakeKey,
) -> None:
    """Open is "still to act on": the meeting's event (confirmed) and its episode match alike, and the episode, the
    record of what was decided, comes first; a cancelled event is history and comes last."""
    key = new_key(make_key)
    put(client, key, "calendar:c1", {"title": "移动端提醒讨论会", "starts_at": "2026-06-01T09:00:00Z",
                                     "status": "confirmed"})
    put(client, key, "calendar:c2", {"title": "移动端提醒讨论会", "starts_at": "2026-06-02T09:00:00Z",
                                     "status": "cancelled"})
    put(client, key, "episode:e1", {"title": "移动端提醒讨论会", "summary": "结论：分阶段上线"})
    hits = search(client, key, query="移动端提醒讨论会")["items"]
    assert [hit["ref"] for hit in hits] == ["episode:e1", "calendar:c1", "calendar:c2"]
    assert [hit["state"] for hit in hits] == ["none", "none", "closed"]


def test_candidates_from_every_permitted_type_deduplicated_by_ref(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    put(client, key, "episode:m1", {"title": "移动端提醒方案评审", "summary": "移动端提醒改为服务端推送",
                                    "topics": ["移动端提醒", "推送"], "decisions": ["移动端提醒走服务端"]})
    put(client, key, "todo:t1", {"title": "实现移动端提醒", "status": "open"})
    put(client, key, "calendar:c1", {"title": "移动端提醒评审会", "starts_at": "2026-06-01T09:00:00Z",
                                     "ends_at": "2026-06-01T10:00:00Z"})
    put(client, key, "contact:p1", {"display_name": "王设计", "notes": "负责移动端提醒的设计"})
    put(client, key, "todo:t2", {"title": "无关的任务", "status": "open"})
    hits = search(client, key, query="移动端提醒")["items"]
    refs = [hit["ref"] for hit in hits]
    # The episode matches in four fields and is still one hit.
    assert sorted(refs) == ["calendar:c1", "contact:p1", "episode:m1", "todo:t1"]
    assert len(refs) == len(set(refs))
    assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)
    assert all("移动端提醒" in hit["snippet"] for hit in hits)
    only_todos = search(client, key, query="移动端提醒", resource="todo")["items"]
    assert [hit["ref"] for hit in only_todos] == ["todo:t1"]


def test_top_k_defaults_to_10_stops_at_50_and_the_response_stays_within_65536_bytes(
    client: TestClient, make_key: MakeKey,
) -> None:
    key = new_key(make_key)
    long_title = "预算" + "长标题🙂" * 240  # about 3,600 bytes of JSON each
    for index in range(60):
        put(client, key, f"todo:n{index:02d}", {"title": f"{long_title} {index}", "status": "open"})
    assert len(search(client, key, query="预算")["items"]) == 10
    assert len(search(client, key, query="预算", top_k=3)["items"]) == 3
    assert error(client.post("/resources/search", json={"query": "预算", "top_k": 51}, headers=auth(key)), 422)
    response = client.post("/resources/search", json={"query": "预算", "top_k": 50}, headers=auth(key))
    assert response.status_code == 200
    assert len(response.content) <= 65_536
    body = response.json()
    assert 0 < len(body["items"]) < 50 and body["omitted"] == 50 - len(body["items"])


def test_a_forgotten_record_is_gone_from_search(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    put(client, key, "todo:gone", {"title": "要忘掉的任务", "status": "open"})
    assert [hit["ref"] for hit in search(client, key, query="忘掉")["items"]] == ["todo:gone"]
    assert client.delete("/records/todo/gone", headers=auth(key)).status_code == 202
    # The tombstone is committed before the 202: the very next search no longer finds it, nor does a read.
    assert search(client, key, query="忘掉")["items"] == []
    assert error(client.post("/resources/read", json={"ref": "todo:gone"}, headers=auth(key)), 404) == "not_found"


def test_a_snippet_from_a_long_body_in_the_artifact_store(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    text = "会议开场。" * 30_000 + "最后决定：通知兜底先上线。" + "散会。" * 100
    put(client, key, "transcript:big", {"title": "评审会转写", "text": text})
    hit = search(client, key, query="通知兜底")["items"][0]
    assert hit["ref"] == "transcript:big" and "最后决定：通知兜底先上线" in hit["snippet"]
    assert len(hit["snippet"]) <= 202


def test_a_public_key_never_searches_internal_types(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    public = new_key(make_key, tenant_id, roles=("public_client",))
    put(client, key, "transcript:x", {"title": "机密转写", "text": "机密转写的原话"})
    put(client, key, "digest:d", {"title": "机密摘要", "summary": "机密", "period_start": "2026-06-01T00:00:00Z",
                                   "period_end": "2026-06-08T00:00:00Z"})
    put(client, key, "intent:i", {"action": "create_todo", "status": "proposed", "summary": "机密意图"})
    put(client, key, "todo:t", {"title": "机密待办", "status": "open", "notes": "机密备注"})
    assert {hit["resource"] for hit in search(client, key, query="机密")["items"]} == {
        "transcript", "digest", "intent", "todo"}
    assert [hit["ref"] for hit in search(client, public, query="机密")["items"]] == ["todo:t"]
    for internal in ("transcript", "digest", "intent", "user_profile"):
        refused = client.post("/resources/search", json={"query": "机密", "resource": internal}, headers=auth(public))
        assert error(refused, 404) == "unknown_resource"
