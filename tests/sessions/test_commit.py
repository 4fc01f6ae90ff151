"""session.commit end to end (real PostgreSQL, real Temporal worker, the rules extractor)."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from memory.db import tenant_session
from memory.models import Memory
from tests.conftest import MakeKey, auth
from tests.sessions.conftest import commit, post, say


def test_a_commit_stores_what_was_stated_refuses_what_may_not_be_and_replays(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    events = post(
        sessions_api, key, "s-c1",
        say("c1-1", "user", "我住在上海。"),
        say("c1-2", "user", "I prefer plain text answers."),
        say("c1-3", "user", "这次用英文回答。"),
        say("c1-4", "user", "记住我的密码是 hunter2"),
        say("c1-5", "assistant", "看起来你更喜欢简短的回答。"),
    )
    done = commit(sessions_api, key, "s-c1", "commit-1")
    assert done["status"] == "completed_with_rejections", done
    created = {(m["category"], m["key"]): m for m in done["memories"]["created"]}
    city = created[("PROFILE", "profile.city")]
    assert city["evidence_refs"] == [f"event:{events[0]}"] and city["source_level"] == "E2"
    assert city["status"] == "ACTIVE"
    assert created[("PREFERENCE", "response.output_format")]["status"] == "ACTIVE"
    inferred = [m for m in done["memories"]["created"] if m["source_level"] == "E4"]
    assert inferred and all(m["status"] == "CANDIDATE" for m in inferred)  # a model's guess never goes ACTIVE
    rejected = done["stats"]["rejected"]
    assert rejected.get("temporary_constraint", 0) >= 1 and rejected.get("secret", 0) >= 1, done["stats"]
    assert done["stats"]["messages"] == 5 and done["stats"]["turns"] == 4
    assert done["summary_id"] is not None

    with tenant_session(engine, tenant) as session:
        contents = session.execute(select(Memory.content)).scalars().all()
        count = session.execute(select(func.count()).select_from(Memory)).scalar_one()
    assert not any("hunter2" in c for c in contents)
    assert not any("英文" in c for c in contents)  # "this time in English" is session state, never a preference

    again = sessions_api.post("/sessions/s-c1/commit", json={"commit_id": "commit-1"}, headers=auth(key))
    assert again.status_code == 202 and again.json()["replayed"] is True
    assert sessions_api.get("/sessions/s-c1/commits/commit-1", headers=auth(key)).json() == done
    nothing = sessions_api.post("/sessions/s-c1/commit", json={"commit_id": "commit-2"}, headers=auth(key))
    assert nothing.status_code == 409 and nothing.json()["error"]["code"] == "nothing_to_commit"
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(func.count()).select_from(Memory)).scalar_one() == count

    state = sessions_api.get("/sessions/s-c1", headers=auth(key)).json()["state"]
    assert state["temporary_constraints"] == {"response.language": "en"}
    latest = sessions_api.get("/sessions/s-c1/summaries/latest", headers=auth(key)).json()
    assert latest["summary_id"] == done["summary_id"] and latest["source_range"] == {"from": 1, "to": 5}


def test_a_correction_in_a_later_session_supersedes_and_recall_cites_the_event(
    sessions_api: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    post(sessions_api, key, "s-old", say("k1", "user", "我住在上海。"))
    first = commit(sessions_api, key, "s-old", "c-old")
    (shanghai,) = [m for m in first["memories"]["created"] if m["key"] == "profile.city"]
    (moved,) = post(sessions_api, key, "s-new", say("k2", "user", "其实我已经搬到杭州了。"))
    second = commit(sessions_api, key, "s-new", "c-new")
    assert second["status"] == "completed", second
    (merge,) = second["memories"]["merged"]
    assert merge["memory_id"] == shanghai["memory_id"] and merge["supersedes_version"] == 1
    memory = sessions_api.get(f"/memories/{shanghai['memory_id']}", headers=auth(key)).json()
    assert memory["version"] == 2 and "杭州" in memory["content"]
    assert {v["version"]: v["status"] for v in memory["history"]} == {1: "SUPERSEDED", 2: "ACTIVE"}
    recalled = sessions_api.post("/memory-query", json={"query": "杭州"}, headers=auth(key)).json()
    items = [item for section in recalled.values() if isinstance(section, list) for item in section
             if isinstance(item, dict) and item.get("memory_id") == shanghai["memory_id"]]
    assert items, recalled
    assert f"event:{moved}" in str(items[0]), items[0]
