"""Forgetting follows lineage: what a commit extracted from a session goes with the session (issue 23, finding 1)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from api.settings import Settings
from memory.db import tenant_session
from memory.deletion.residue import claim_scan
from memory.models import Memory, MemoryLexeme, MemorySearch
from tests.conftest import MakeKey, auth, poll
from tests.factories import candidate
from tests.sessions.conftest import commit, post, say
from tests.workers import api_with_worker


@pytest.fixture(scope="module")
def lineage_api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "lineage") as client:
        yield client


def forget(client: TestClient, key: str, scope: dict[str, Any]) -> dict[str, Any]:
    accepted = client.post("/deletion-requests", json={"deletion_request_id": f"d-{uuid.uuid4().hex[:8]}",
                                                       "scope": scope}, headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    return poll(client, key, f"/memory-deletions/{accepted.json()['job_id']}",
                lambda job: job["status"] in ("completed", "failed_requires_action"), 90)


def test_deleting_a_session_forgets_the_memories_its_commit_extracted(
    lineage_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    post(lineage_api, key, "s-gone", say("m1", "user", "I live in Reykjavik."),
         say("m2", "user", "I prefer answers in Icelandic."))
    done = commit(lineage_api, key, "s-gone", "c-gone")
    extracted = [uuid.UUID(m["memory_id"]) for m in done["memories"]["created"]]
    assert extracted, done
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(MemorySearch.memory_id).where(MemorySearch.memory_id.in_(extracted))).first()

    job = forget(lineage_api, key, {"type": "session", "session_id": "s-gone"})

    with tenant_session(engine, tenant) as session:
        left = session.execute(select(Memory.memory_id, Memory.content).where(
            Memory.memory_id.in_(extracted), Memory.content != "")).all()
        search = session.execute(select(MemorySearch.memory_id, MemorySearch.search_text).where(
            MemorySearch.memory_id.in_(extracted))).all()
        postings = session.execute(select(MemoryLexeme.memory_id).where(MemoryLexeme.memory_id.in_(extracted))).all()
    remaining = (left, search, postings)
    assert not job["fully_deleted"] or remaining == ([], [], []), (job, remaining)
    assert remaining == ([], [], []), remaining
    assert job["status"] == "completed" and job["fully_deleted"] is True and job["remaining_copies"] == []


def test_a_copy_the_purge_does_not_know_keeps_the_job_short_of_completed(
    lineage_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """The residue scan decides, not the purge's selection: a copy of a deleted message inside a longer text
    the deletion does not cover (a memory written by hand) is found and listed by table, column and row."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    message = "我的保险柜密码提示是祖母老家门牌号"
    post(lineage_api, key, "s-copy", say("c1", "user", message))
    copied = lineage_api.post("/memory-candidates", json=candidate(f"备忘：{message}，别告诉别人"),
                              headers=auth(key)).json()

    job = forget(lineage_api, key, {"type": "session", "session_id": "s-copy"})

    assert job["status"] == "failed_requires_action" and job["fully_deleted"] is False, job
    copies = [c for c in job["remaining_copies"] if "#" in c]
    assert f"memories.content#{copied['memory_id']}/1" in copies, copies
    assert all(not c.startswith("memory_events.") for c in copies), copies  # the session's own message is gone
    with tenant_session(engine, tenant) as session:  # the text is listed by place, never quoted
        assert message not in str(job)
        assert session.execute(select(Memory.content).where(
            Memory.memory_id == uuid.UUID(copied["memory_id"]))).scalar_one().startswith("备忘")


def test_deleting_a_message_scrubs_the_older_version_a_later_message_superseded(
    lineage_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """Found by the residue property test: the second "I live in" replaced the first memory's content in a new
    version; deleting the first message left version 1, built from it alone, holding its text."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    first, _ = post(lineage_api, key, "s-two", say("v1", "user", "I live in Windhoek since zq1"),
                    say("v2", "user", "I live in Nuuk since zq2"))
    commit(lineage_api, key, "s-two", "c-two")

    job = forget(lineage_api, key, {"type": "event", "event_id": first})

    assert (job["status"], job["remaining_copies"]) == ("completed", []), job["remaining_copies"]
    with tenant_session(engine, tenant) as session:
        held = session.execute(select(Memory.memory_id, Memory.version).where(Memory.content.contains("Windhoek"))
                               ).all()
    assert held == []


def test_memories_of_one_stage_sharing_generated_overview_lines_are_no_copies(
    lineage_api: TestClient, make_key: MakeKey
) -> None:
    """Found by the residue property test: two messages at the same time gave two memories whose overviews share
    ``source: user, <time>``; deleting one message reported the other memory's overview as a copy."""
    key = make_key(tenant=f"t-{uuid.uuid4().hex[:12]}")
    first, _ = post(lineage_api, key, "s-ov", say("o1", "user", "I live in Reykjavik since zqov1"),
                    say("o2", "user", "I prefer answers about Reykjavik and zqov2"))
    commit(lineage_api, key, "s-ov", "c-ov")

    job = forget(lineage_api, key, {"type": "event", "event_id": first})

    assert (job["status"], job["remaining_copies"]) == ("completed", []), job["remaining_copies"]


@pytest.mark.parametrize(("first", "second", "deleted"), [
    ("I live in Reykjavik.", "I live in Akureyri.", 0),
    ("I live in Reykjavik.", "I live in Akureyri.", 1),
    ("我住在成都。", "I live in Akureyri.", 1),
    ("Please remember that my locker word is kvoldsol.", "I like rooibos tea.", 0),
])
def test_deleting_one_message_forgets_it_in_every_commit_that_names_what_came_from_it(
    lineage_api: TestClient, make_key: MakeKey, engine: Engine, first: str, second: str, deleted: int
) -> None:
    """Commits name the memories they touched, with their abstracts: a second message that corrects the first
    supersedes the memory the first commit created, so deleting the correction deletes that memory and the
    first commit's entry for it quotes deleted text although its stage never held the deleted message (the
    wall found it: ``session_commits.memories`` of the first commit). Every commit naming a memory the job
    deleted is scrubbed."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    events = post(lineage_api, key, "s-two", say("a1", "user", first))
    commit(lineage_api, key, "s-two", "c-one")
    events += post(lineage_api, key, "s-two", say("a2", "user", second))
    commit(lineage_api, key, "s-two", "c-two")

    job = forget(lineage_api, key, {"type": "event", "event_id": events[deleted]})

    assert job["status"] == "completed" and job["fully_deleted"] is True, job
    assert job["remaining_copies"] == [], job


def test_a_tenants_residue_scans_run_one_at_a_time_and_a_waiting_one_completes_later(
    lineage_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """Fair admission (issue 23, finding 7): while one verification of a tenant holds its scan, another of the same
    tenant does not take a worker slot to wait: it is tried again later, and completes once the scan is free.
    Another tenant's deletion is not held up."""
    tenant, other = (f"t-{uuid.uuid4().hex[:12]}" for _ in range(2))
    key, other_key = make_key(tenant=tenant), make_key(tenant=other)
    memory = lineage_api.post("/memory-candidates", json=candidate("我下周二去杭州开年度预算会"),
                              headers=auth(key)).json()["memory_id"]
    theirs = lineage_api.post("/memory-candidates", json=candidate("我每周四下午练习大提琴"),
                              headers=auth(other_key)).json()["memory_id"]
    with tenant_session(engine, tenant) as holder:  # the tenant's scan, taken by "another verification"
        assert claim_scan(holder, tenant)
        accepted = lineage_api.post("/deletion-requests", json={
            "deletion_request_id": "d-held", "scope": {"type": "memory", "memory_id": memory}}, headers=auth(key))
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["job_id"]
        done = forget(lineage_api, other_key, {"type": "memory", "memory_id": theirs})
        assert done["status"] == "completed", done  # another tenant's verification ran meanwhile
        time.sleep(3)  # the held one was tried (and refused) meanwhile
        held = lineage_api.get(f"/memory-deletions/{job_id}", headers=auth(key)).json()
        assert held["status"] not in ("completed", "failed_requires_action"), held
    job = poll(lineage_api, key, f"/memory-deletions/{job_id}",
               lambda body: body["status"] in ("completed", "failed_requires_action"), 60)
    assert job["status"] == "completed" and job["fully_deleted"] is True, job
