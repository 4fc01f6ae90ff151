"""Forgetting follows lineage: what a commit extracted from a session goes with the session (issue 23, finding 1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from api.settings import Settings
from memory.db import tenant_session
from memory.models import Memory, MemoryLexeme, MemorySearch
from tests.conftest import MakeKey, auth, poll
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
