"""The rest of the write pipeline over the real API and worker: remember-now (E1), stable choices (E3), the
profile injection, recalled context, and the window's tool pairing."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from memory.db import tenant_session
from memory.models import Memory, MemoryUsage
from memory.sessions.models import SessionLink
from tests.conftest import MakeKey, auth
from tests.sessions.conftest import commit, post, say


def test_remember_this_is_written_at_once_and_a_later_commit_does_not_write_it_again(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    sessions_api.post("/sessions", json={"session_id": "s-e1"}, headers=auth(key))
    batch = {"messages": [say("e1-1", "user", "请记住我对花生过敏。")]}
    first = sessions_api.post("/sessions/s-e1/messages", json=batch, headers=auth(key)).json()
    (remembered,) = first["remembered"]
    assert remembered["decision"] == "CREATE" and remembered["evidence_refs"] == [
        f"event:{first['events'][0]['event_id']}"
    ]
    memory = sessions_api.get(f"/memories/{remembered['memory_id']}", headers=auth(key)).json()
    assert memory["status"] == "ACTIVE" and memory["source_level"] == "E1" and "花生" in memory["content"]
    replay = sessions_api.post("/sessions/s-e1/messages", json=batch, headers=auth(key)).json()
    assert [m["memory_id"] for m in replay["remembered"]] == [remembered["memory_id"]]
    done = commit(sessions_api, key, "s-e1", "c-e1")
    assert not done["memories"]["created"]
    assert [m["memory_id"] for m in done["memories"]["skipped"]] == [remembered["memory_id"]]
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(func.count()).select_from(Memory)).scalar_one() == 1


def test_the_same_temporary_choice_in_three_sessions_becomes_a_stable_e3_preference(
    sessions_api: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    for n in (1, 2):
        post(sessions_api, key, f"s-e3-{n}", say(f"e3-{n}", "user", "这次用纯文本回答。"))
        done = commit(sessions_api, key, f"s-e3-{n}", f"c-e3-{n}")
        assert not done["memories"]["created"] and done["stats"]["rejected"] == {"temporary_constraint": 1}
    events = post(sessions_api, key, "s-e3-3", say("e3-3", "user", "这次用纯文本回答。"))
    third = commit(sessions_api, key, "s-e3-3", "c-e3-3")
    (stable,) = third["memories"]["created"]
    assert (stable["category"], stable["key"], stable["source_level"]) == ("PREFERENCE", "response.output_format",
                                                                           "E3")
    assert len(stable["evidence_refs"]) == 3 and f"event:{events[0]}" in stable["evidence_refs"]
    memory = sessions_api.get(f"/memories/{stable['memory_id']}", headers=auth(key)).json()
    assert memory["content"] == "plain_text"  # what recall's effective preferences read


def test_the_profile_is_injected_at_session_start_and_recalled_context_is_cited_not_extracted(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    profile = sessions_api.post("/memory-candidates", json={
        "category": "PROFILE", "space": "USER", "key": "profile.city", "content": "我住在上海",
        "source": {"source_id": "chat-42", "source_type": "EXPLICIT_USER_STATEMENT",
                   "captured_at": "2026-06-01T09:00:00Z"}, "source_level": "E2"}, headers=auth(key)).json()
    recalled = f"memory:{profile['memory_id']}"
    post(sessions_api, key, "s-prof",
         say("p1", "system", "用户资料：我住在上海", context_refs=[recalled]),
         say("p2", "user", "我住在上海。", context_refs=[recalled]),
         say("p3", "user", "帮我查一下天气"))
    window = sessions_api.get("/sessions/s-prof/window?budget_tokens=2000", headers=auth(key)).json()
    (injected,) = window["profile"]
    assert (injected["memory_id"], injected["source_id"]) == (profile["memory_id"], "chat-42")
    assert injected["captured_at"].startswith("2026-06-01")
    done = commit(sessions_api, key, "s-prof", "c-prof")
    assert not done["memories"]["created"] and not done["memories"]["merged"], done
    assert done["stats"]["contexts_used"] == 1
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(func.count()).select_from(Memory)).scalar_one() == 1
        usage = session.execute(select(MemoryUsage.active_count)).scalar_one()
        links = session.execute(select(SessionLink.target, SessionLink.relation)).all()
    assert usage == 1 and [(t, r) for t, r in links] == [(recalled, "used")]
    shown = sessions_api.get("/sessions/s-prof", headers=auth(key)).json()["links"]
    assert shown == [{"target": recalled, "relation": "used", "commit_id": "c-prof"}]


def test_the_window_keeps_a_tool_call_and_its_result_together_under_a_tight_budget(
    sessions_api: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    call = {"id": "call-1", "name": "sales_query", "arguments": "{\"month\": \"2026-06\"}"}
    post(sessions_api, key, "s-win",
         say("w1", "user", "帮我看一下六月的销售数据"),
         say("w2", "assistant", "", tool_calls=[call]),
         say("w3", "tool", "revenue 83653951.78 CNY " * 200, tool_call_id="call-1"),
         say("w4", "user", "谢谢，然后写成报告"))
    roomy = sessions_api.get("/sessions/s-win/window?budget_tokens=5000", headers=auth(key)).json()
    by_seq = {m["sequence_no"]: m for m in roomy["messages"]}
    assert {2, 3} <= by_seq.keys() and by_seq[3]["artifact_ref"].startswith("event:")
    assert len(by_seq[3]["content"]) < 400  # a digest, never the full result
    tight = sessions_api.get("/sessions/s-win/window?budget_tokens=60", headers=auth(key)).json()
    kept = {m["sequence_no"] for m in tight["messages"]}
    assert 4 in kept and (({2, 3} <= kept) or not ({2, 3} & kept)), tight
    assert tight["tokens"] <= 60
    bad = sessions_api.get("/sessions/s-win/window?budget_tokens=0", headers=auth(key))
    assert bad.status_code == 422
