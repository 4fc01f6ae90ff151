"""Forgetting reaches what a commit derived: the summary is rebuilt without the event, the memory built only
from it goes, and a commit racing a deletion of its owner writes nothing back."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from memory.db import tenant_session
from memory.sessions.commit_steps import persist
from memory.sessions.commits import CommitRef
from memory.sessions.models import SessionSummary
from tests.conftest import MakeKey, auth, poll
from tests.sessions.conftest import commit, post, say


def _forget(client: TestClient, key: str, scope: dict[str, Any]) -> dict[str, Any]:
    accepted = client.post("/deletion-requests", json={"deletion_request_id": f"d-{uuid.uuid4().hex[:8]}",
                                                       "scope": scope}, headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    return poll(client, key, f"/memory-deletions/{accepted.json()['job_id']}",
                lambda job: job["status"] in ("completed", "failed_requires_action"), 60)


def test_deleting_a_source_event_rebuilds_the_summary_and_removes_the_memory_it_alone_supports(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    city, draft = post(
        sessions_api, key, "s-del",
        say("d1", "user", "我住在上海。"),
        say("d2", "user", "报告草稿已经生成，但尚未审批，也没有发布。"),
    )
    done = commit(sessions_api, key, "s-del", "c-del")
    (memory,) = [m for m in done["memories"]["created"] if m["key"] == "profile.city"]
    before = sessions_api.get("/sessions/s-del/summaries/latest", headers=auth(key)).json()
    assert "上海" in before["overview"] and "尚未审批" in before["overview"]

    job = _forget(sessions_api, key, {"type": "event", "event_id": city})
    assert job["status"] == "completed", job
    layers = {layer["layer"]: layer for layer in job["layers"]}
    assert layers["derived_summaries"]["status"] == "done"

    assert sessions_api.get(f"/memories/{memory['memory_id']}", headers=auth(key)).status_code == 404
    after = sessions_api.get("/sessions/s-del/summaries/latest", headers=auth(key)).json()
    assert after["version"] == before["version"] + 1 and after["reason"] == "rebuilt_after_deletion"
    assert "上海" not in after["overview"] and "尚未审批" in after["overview"]  # the rest survives, verbatim
    cited = {event for section in ("facts", "pending", "completed", "goal") for item in after[section]
             for event in item["source_event_ids"]}
    assert city not in cited and draft in cited
    with tenant_session(engine, tenant) as session:
        old = session.execute(select(SessionSummary).where(SessionSummary.version == before["version"])).scalar_one()
        assert old.purged_at is not None and old.overview == "" and old.body == {}
    assert "上海" in str(done["memories"])  # the commit row quoted the message's abstract ...
    scrubbed = sessions_api.get("/sessions/s-del/commits/c-del", headers=auth(key)).json()
    assert "上海" not in str(scrubbed) and scrubbed["memories"]["created"][0]["memory_id"]  # ... ids stay
    assert layers["derived_summaries"]["evidence"]["commits_scrubbed"] == 1


def test_a_commit_racing_a_deletion_of_its_owner_writes_nothing_back(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    post(sessions_api, key, "s-race", say("r1", "user", "我住在广州。"))
    post(sessions_api, key, "s-race2", say("r2", "user", "I prefer markdown."))
    done = commit(sessions_api, key, "s-race2", "c-first")  # accepted with epoch 0
    assert done["memories"]["created"]
    with tenant_session(engine, tenant) as session:  # a commit accepted before the deletion ...
        from memory.identity.auth import PrincipalContext
        from memory.sessions.commits import accept_commit

        owner = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), key_id="test")
        accept_commit(session, owner, "s-race", "c-late")
    assert _forget(sessions_api, key, {"type": "subject"})["status"] == "completed"
    with tenant_session(engine, tenant) as session:  # ... persists after it: refused, nothing written
        ended = persist(session, CommitRef(tenant, "s-race", "c-late", "alice"))
        assert ended.status == "cancelled_by_deletion" and ended.memories == {}
