"""The next variant of finding 1: random messages, commits, records and memories, a deletion of a random scope.

After completion the independent, catalog-driven residue scan is empty; a copy of a deleted text planted
afterwards (in a table the purge never touches, or through the API) is found at its table and column: the
scan can fail, so its empty answer means something.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from api.settings import Settings
from memory.db import tenant_session
from memory.deletion.residue import scan
from memory.models import AuditEntry
from tests.conftest import MakeKey, auth, poll
from tests.factories import candidate
from tests.sessions.conftest import commit, post, say
from tests.workers import api_with_worker

CITIES = ["Reykjavik", "Tromso", "Windhoek", "Ushuaia", "Nuuk", "Hobart"]
ZH = "我你他住在喜欢绿茶咖啡跑步周末公司项目报告审批草稿海边山上"
TEMPLATES = ["I live in {city} since {token}", "I prefer answers about {city} and {token}",
             "我住在{zh}{token}", "Remember that the {token} report for {city} is pending approval"]


@pytest.fixture(scope="module")
def residue_api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "residue") as client:
        yield client


sentence = st.builds(
    lambda template, city, zh: (template, city, zh),
    st.sampled_from(TEMPLATES), st.sampled_from(CITIES), st.text(alphabet=ZH, min_size=4, max_size=10),
)
plans = st.fixed_dictionaries({
    "messages": st.lists(sentence, min_size=1, max_size=3),
    "commit": st.booleans(),
    "scope": st.sampled_from(["session", "event", "subject", "record", "memory"]),
    "place": st.sampled_from(["audit_log", "sessions"]),
})


def _forget(client: TestClient, key: str, scope: dict[str, Any]) -> dict[str, Any]:
    accepted = client.post("/deletion-requests", json={"deletion_request_id": f"d-{uuid.uuid4().hex[:8]}",
                                                       "scope": scope}, headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    return poll(client, key, f"/memory-deletions/{accepted.json()['job_id']}",
                lambda job: job["status"] in ("completed", "failed_requires_action"), 120)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans)
def test_after_any_completed_deletion_the_residue_scan_is_empty_and_finds_a_planted_copy(
    residue_api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings, plan: dict[str, Any]
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    token = f"zq{uuid.uuid4().hex[:6]}"  # every example's texts are its own
    texts = [template.format(city=city, zh=zh, token=f"{token}n{n}")
             for n, (template, city, zh) in enumerate(plan["messages"])]
    events = post(residue_api, key, "s-a", *(say(f"m{n}", "user", t) for n, t in enumerate(texts)))
    post(residue_api, key, "s-b", say("k1", "user", f"Something else entirely kept {token} here"))
    if plan["commit"]:
        commit(residue_api, key, "s-a", "c-a")
    title = f"Renew the {token} harbour parking permit"
    assert residue_api.put("/records/todo/t-a", json={"data": {"title": title, "status": "open"}},
                           headers=auth(key)).status_code in (200, 201)
    memory_text = f"Alice keeps {token} bees on the roof of the barn"
    memory = residue_api.post("/memory-candidates", json=candidate(memory_text), headers=auth(key)).json()

    scope, deleted = {
        "session": ({"type": "session", "session_id": "s-a"}, texts[0]),
        "event": ({"type": "event", "event_id": events[0]}, texts[0]),
        "subject": ({"type": "subject"}, texts[0]),
        "record": ({"type": "record", "resource": "todo", "record_id": "t-a"}, title),
        "memory": ({"type": "memory", "memory_id": memory["memory_id"]}, memory_text),
    }[plan["scope"]]
    job = _forget(residue_api, key, scope)
    assert (job["status"], job["fully_deleted"], job["remaining_copies"]) == ("completed", True, []), (
        plan, job["remaining_copies"], job["layers"])
    job_id = uuid.UUID(job["job_id"])

    def residue() -> list[tuple[str, str]]:
        with tenant_session(engine, tenant) as session:
            found = scan(session, tenant, settings.artifact_root(engine), {job_id: "alice"})[job_id]
        return [(copy.table, copy.column) for copy in found]

    assert residue() == []
    planted = f"forwarded: {deleted} (kept by mistake)"
    if plan["place"] == "audit_log":  # a table no purge touches
        with tenant_session(engine, tenant) as session:
            session.add(AuditEntry(tenant_id=tenant, actor="someone", action="NOTE", detail={"note": planted}))
    else:  # through the API, after the barrier
        created = residue_api.post("/sessions", json={"session_id": "s-new", "title": planted[:200]},
                                   headers=auth(key))
        assert created.status_code in (200, 201), created.text
    expected = ("audit_log", "detail") if plan["place"] == "audit_log" else ("sessions", "title")
    assert expected in residue(), (plan, residue())
