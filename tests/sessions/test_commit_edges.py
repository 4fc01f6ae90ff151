"""Edges a review of the commit pipeline found, each reproduced before its fix: a guess confirmed by a statement,
a deleted message hidden at once, a failed policy commit not swept forever, refs to others' memories, another
agent's session, two requests opening one session, secrets in summaries, a deleted memory quoted by a commit."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from temporalio.exceptions import ApplicationError

from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.enums import Category, SourceLevel
from memory.identity.auth import PrincipalContext
from memory.models import MemoryUsage
from memory.sessions import store
from memory.sessions.commit_steps import persist
from memory.sessions.commits import CommitRef, CommitStatus, accept_commit, move, release_stage
from memory.sessions.extraction.base import Candidate
from memory.sessions.policy import CommitPolicy, commit_idle
from memory.sessions.proposal import candidate_json
from tests.conftest import MakeKey, auth, poll
from tests.sessions.conftest import commit, post, say
from tests.workers import ThreadWorker


def _alice(tenant: str) -> PrincipalContext:
    return PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), key_id="test")


def _persist(engine: Engine, tenant: str, session_id: str, commit_id: str, *candidates: Candidate) -> dict[str, Any]:
    """Accept a commit and persist ``candidates`` as its extractor's proposal (the steps before are tested apart)."""
    with tenant_session(engine, tenant) as session:
        accepted = accept_commit(session, _alice(tenant), session_id, commit_id)
        accepted.commit.status = CommitStatus.EXTRACTED.value
        accepted.commit.memories = {"proposed": {"candidates": [candidate_json(c) for c in candidates]}}
    with tenant_session(engine, tenant) as session:
        return dict(persist(session, CommitRef(tenant, session_id, commit_id, "alice")).memories)


def test_what_a_model_guessed_becomes_active_when_the_user_states_it(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    (guess,) = post(client, key, "s-g", say("g1", "assistant", "You seem to work as a nurse in Berlin."))
    text = "I work as a nurse in Berlin"
    _persist(engine, tenant, "s-g", "c1", Candidate(Category.ENTITY, text, "ENTITY", text, SourceLevel.E4, (guess,)))
    (stated,) = post(client, key, "s-g", say("g2", "user", text))
    memories = _persist(engine, tenant, "s-g", "c2",
                        Candidate(Category.ENTITY, text, "ENTITY", text, SourceLevel.E2, (stated,)))
    (merged,) = memories["merged"]
    assert merged["reason"] == "stated_now"
    memory = client.get(f"/memories/{merged['memory_id']}", headers=auth(key)).json()
    assert (memory["status"], memory["source_level"], memory["version"]) == ("ACTIVE", "E2", 2)


def test_a_deleted_message_leaves_the_window_and_state_when_the_deletion_is_accepted(
    client: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    secret, _ = post(client, key, "s-w", say("w1", "user", "my plan is ZEBRA-42"), say("w2", "user", "ok thanks"))
    accepted = client.post("/deletion-requests", json={"deletion_request_id": "d-w",
                                                       "scope": {"type": "event", "event_id": secret}},
                           headers=auth(key))
    assert accepted.status_code == 202  # this client has no worker: only the barrier has run
    assert "ZEBRA-42" not in client.get("/sessions/s-w/window", headers=auth(key)).text
    assert "ZEBRA-42" not in client.get("/sessions/s-w", headers=auth(key)).text


def test_a_failed_policy_commit_is_not_swept_again_until_a_new_message_comes(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    post(client, key, "s-i", say("i1", "user", "hello there"))
    policy, later = CommitPolicy(0, 0, 1.0), datetime.now(UTC) + timedelta(minutes=5)
    with tenant_session(engine, tenant) as session:
        (first,) = commit_idle(session, tenant, policy, later)
        move(first.commit, CommitStatus.FAILED_REQUIRES_ACTION)
        release_stage(session, first.commit)
    with tenant_session(engine, tenant) as session:
        assert commit_idle(session, tenant, policy, later) == []
    post(client, key, "s-i", say("i2", "user", "still there?"))
    with tenant_session(engine, tenant) as session:
        (retry,) = commit_idle(session, tenant, policy, later)
        assert (retry.commit.commit_id, retry.replayed) == ("auto-1-2", False)
    reserved = client.post("/sessions/s-i/commit", json={"commit_id": "auto-9-9"}, headers=auth(key))
    assert reserved.status_code == 422


def test_context_refs_to_memories_the_owner_cannot_see_count_no_use(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant), make_key(tenant=tenant, user="bob")
    bobs = sessions_api.post("/memory-candidates", json={
        "category": "PROFILE", "space": "USER", "content": "bob's private note",
        "source": {"source_id": "x", "source_type": "EXPLICIT_USER_STATEMENT", "captured_at": "2026-06-01T09:00:00Z"},
        "source_level": "E2"}, headers=auth(bob)).json()["memory_id"]
    post(sessions_api, alice, "s-refs", say("r1", "user", "hello", context_refs=[f"memory:{bobs}"]))
    done = commit(sessions_api, alice, "s-refs", "c-refs")
    assert done["stats"]["contexts_used"] == 0
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(MemoryUsage.active_count)).scalars().all() == []


def test_a_session_is_one_agents_another_agent_of_the_user_sees_none(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    writer, other = make_key(tenant=tenant, agent="writer-bot"), make_key(tenant=tenant, agent="other-bot")
    post(client, writer, "s-agent", say("a1", "user", "hi"))
    assert client.get("/sessions/s-agent", headers=auth(other)).status_code == 404
    assert client.post("/sessions/s-agent/messages", json={"messages": [say("a2", "user", "x")]},
                       headers=auth(other)).status_code == 404


def test_two_requests_opening_one_session_are_a_creation_and_a_replay(engine: Engine, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    held, release, outcome = threading.Event(), threading.Event(), []

    def first() -> None:
        with tenant_session(engine, tenant) as session:
            store.open_session(session, _alice(tenant), store.NewSession("s-x"), "digest")
            held.set()
            release.wait(10)

    def second() -> None:
        with tenant_session(engine, tenant) as session:
            outcome.append(store.open_session(session, _alice(tenant), store.NewSession("s-x"), "digest")[1])

    one = threading.Thread(target=first)
    one.start()
    assert held.wait(10)
    two = threading.Thread(target=second)
    two.start()
    time.sleep(0.5)
    release.set()
    one.join(10)
    two.join(10)
    assert outcome == [False]  # a replay of the first, not a unique-key crash


def test_deleting_a_memory_removes_its_abstract_from_the_commits_that_name_it_and_completes(
    sessions_api: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    post(sessions_api, key, "s-m", say("m1", "user", "我住在厦门。"))
    done = commit(sessions_api, key, "s-m", "c-m")
    (memory,) = done["memories"]["created"]
    assert "厦门" in memory["abstract"]
    job = sessions_api.delete(f"/memories/{memory['memory_id']}", headers=auth(key)).json()
    state = poll(sessions_api, key, f"/memory-deletions/{job['job_id']}",
                 lambda view: view["status"] in ("completed", "failed_requires_action"), 60)
    assert state["status"] == "completed", state
    assert "厦门" not in sessions_api.get("/sessions/s-m/commits/c-m", headers=auth(key)).text


class _BrokenExtractor:
    """An extractor with a bug of its own (not an endpoint failing): the commit must not blame the endpoint."""

    name = "broken"

    def extract(self, stage: Any) -> Any:
        raise ApplicationError("a bug in the extractor", type="Bug", non_retryable=True)


def test_a_failing_extractor_step_is_extraction_failed_not_extractor_unavailable(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    own = settings.model_copy(update={"task_queue": f"broken-{uuid.uuid4().hex[:8]}"})
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine),
                          extractor=_BrokenExtractor()).start()
    try:
        with TestClient(create_app(own)) as client:
            key = make_key()
            post(client, key, "s-broken", say("b1", "user", "我住在上海。"))
            done = commit(client, key, "s-broken", "c-broken")
    finally:
        worker.stop()
    assert done["status"] == "failed_requires_action"
    assert [r["reason"] for r in done["reasons"]] == ["extraction_failed"], done["reasons"]


def test_a_negated_statement_is_not_skipped_as_a_near_duplicate_of_the_positive_one(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    liked = "I like spicy food, especially Sichuan hotpot with extra chili."
    disliked = "I don't like spicy food, especially Sichuan hotpot with extra chili."
    (first,) = post(client, key, "s-neg", say("n1", "user", liked))
    _persist(engine, tenant, "s-neg", "c1", Candidate(Category.PREFERENCE, liked, "PREFERENCE", liked,
                                                       SourceLevel.E2, (first,)))
    (second,) = post(client, key, "s-neg", say("n2", "user", disliked))
    memories = _persist(engine, tenant, "s-neg", "c2", Candidate(Category.PREFERENCE, disliked, "PREFERENCE",
                                                                  disliked, SourceLevel.E2, (second,)))
    assert [m["decision"] for m in memories["created"]] == ["CREATE"], memories
