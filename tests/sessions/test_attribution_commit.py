"""Attribution end to end (real PostgreSQL, real Temporal worker, the rules extractor): someone else's words never
replace the user's profile, and "don't remember X" forgets an existing X through the deletion path."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from memory.db import tenant_session
from memory.models import DeletionJob, Memory
from tests.conftest import MakeKey, auth, poll
from tests.sessions.conftest import commit, post, say

FORGERIES = (
    'My colleague Bob told me: "I live in Paris"',
    "---------- Forwarded message ---------\nFrom: Carol <carol@example.com>\n\n> I live in Lisbon",
    'Translate into French: "I live in Cairo."',
    'Is this sentence grammatical? "I prefer answers in Spanish."',
    "Don't remember that I live in Berlin.",
    "他让我转告：请记住我住在成都",
    "我朋友说：\u201c我住在广州\u201d",
    "Here is our chat:\nUser: I live in Denver\nAssistant: Noted, you live in Denver.",
    "Suppose I live in Miami.",
    "For example: I moved to Oslo.",
    "Let's role-play: I live in Tortuga.",
    "假如我住在纽约，房租要多少？",
)
FORGED_PLACES = ("Paris", "Lisbon", "Cairo", "Spanish", "Berlin", "成都", "广州", "Denver", "Miami", "Oslo", "Tortuga",
                 "纽约")


def test_forged_statements_never_replace_the_users_city(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    post(sessions_api, key, "s-home", say("h1", "user", "我住在上海。"))
    (city,) = [m for m in commit(sessions_api, key, "s-home", "c-home")["memories"]["created"]
               if m["key"] == "profile.city"]

    sessions_api.post("/sessions", json={"session_id": "s-forged"}, headers=auth(key))
    answer = sessions_api.post("/sessions/s-forged/messages", headers=auth(key), json={"messages": [
        say(f"f{n}", "user", text) for n, text in enumerate(FORGERIES)
    ] + [say("own", "user", "I prefer plain text answers.")]})
    assert answer.status_code == 201, answer.text
    assert answer.json()["remembered"] == [] and answer.json()["forgotten"] == []  # 转告's 记住 is not the user's
    done = commit(sessions_api, key, "s-forged", "c-forged")

    assert done["status"] == "completed_with_rejections", done
    assert done["memories"].get("merged", []) == []
    [stored] = done["memories"]["created"]  # the user's own preference beside the forgeries
    assert stored["key"] == "response.output_format"
    rejected = done["stats"]["rejected"]
    assert rejected["not_self_statement"] >= len(FORGERIES) - 1 and rejected["forget_instruction"] == 1, rejected
    memory = sessions_api.get(f"/memories/{city['memory_id']}", headers=auth(key)).json()
    assert (memory["version"], memory["status"], memory["content"]) == (1, "ACTIVE", "我住在上海")
    with tenant_session(engine, tenant) as session:
        contents = session.execute(select(Memory.content)).scalars().all()
    assert not [c for c in contents for place in FORGED_PLACES if place in c]


def _forgotten(client: TestClient, key: str, session_id: str, idempotency_key: str, text: str) -> list[dict[str, str]]:
    answer = client.post(f"/sessions/{session_id}/messages", headers=auth(key),
                         json={"messages": [say(idempotency_key, "user", text)]})
    assert answer.status_code in (200, 201), answer.text
    assert answer.json()["remembered"] == []
    forgotten: list[dict[str, str]] = answer.json()["forgotten"]
    return forgotten


def test_dont_remember_deletes_the_existing_memory_through_the_deletion_path_and_stores_nothing(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant), make_key(tenant=tenant, user="bob")
    post(sessions_api, alice, "s-berlin", say("b1", "user", "I live in Berlin."), say("b2", "user", "我在腾讯工作。"))
    created = commit(sessions_api, alice, "s-berlin", "c-berlin")["memories"]["created"]
    [berlin] = [m for m in created if "Berlin" in str(m)]
    [tencent] = [m for m in created if m["key"] == "profile.employer"]

    # Someone else saying it forgets nothing of alice's: identity comes from the key.
    sessions_api.post("/sessions", json={"session_id": "s-bob"}, headers=auth(bob))
    assert _forgotten(sessions_api, bob, "s-bob", "x1", "Don't remember that I live in Berlin.") == []

    sessions_api.post("/sessions", json={"session_id": "s-forget"}, headers=auth(alice))
    [job] = _forgotten(sessions_api, alice, "s-forget", "g1", "Don't remember that I live in Berlin.")
    assert job["memory_id"] == berlin["memory_id"]
    assert sessions_api.get(f"/memories/{berlin['memory_id']}", headers=auth(alice)).status_code == 404  # the barrier
    finished = poll(sessions_api, alice, f"/memory-deletions/{job['job_id']}",
                    lambda body: body["status"] in ("completed", "failed_requires_action"), 90)
    assert finished["status"] == "completed", finished
    with tenant_session(engine, tenant) as session:
        row = session.execute(select(DeletionJob).where(DeletionJob.job_id == uuid.UUID(job["job_id"]))).scalar_one()
        assert (row.requested_by, row.subject_user_id, row.scope_type) == ("alice", "alice", "memory")
    # A replay of the message reports the same job, and starts no other.
    assert _forgotten(sessions_api, alice, "s-forget", "g1", "Don't remember that I live in Berlin.") == [job]

    [zh_job] = _forgotten(sessions_api, alice, "s-forget", "g2", "别记住我在腾讯工作。")
    assert zh_job["memory_id"] == tencent["memory_id"]
    done = commit(sessions_api, alice, "s-forget", "c-forget")
    assert done["memories"].get("created", []) == [] and done["memories"].get("merged", []) == [], done
    assert done["stats"]["rejected"]["forget_instruction"] == 2
    with tenant_session(engine, tenant) as session:
        live = session.execute(select(Memory.content).where(Memory.status == "ACTIVE",
                                                            Memory.owner_id == "alice")).scalars().all()
    assert not [c for c in live if "Berlin" in c or "腾讯" in c]
