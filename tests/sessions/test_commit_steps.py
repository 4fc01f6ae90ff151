"""A session commit's steps called directly (no Temporal), against real PostgreSQL: each is idempotent, a commit
whose owner's data was deleted refuses every write, and the proposal's stored JSON keeps the shape older rows
have."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from memory.db import tenant_session
from memory.epochs import bump_epoch
from memory.identity.auth import PrincipalContext
from memory.sessions import commit_steps
from memory.sessions.commit_steps import CommitFailure
from memory.sessions.commits import CommitRef, accept_commit
from memory.sessions.extraction.rules import RulesExtractor
from memory.sessions.models import ChatSession, SessionCommit, SessionSummary
from memory.sessions.proposal import Proposal
from tests.conftest import MakeKey
from tests.sessions.conftest import post, say

LEGACY_PROPOSAL: dict[str, Any] = {
    "candidates": [{"category": "PROFILE", "abstract": "lives in Shanghai", "overview": "PROFILE profile.city",
                    "content": "我住在上海。", "source_level": "E2", "evidence_event_ids": ["e-1"],
                    "key": "profile.city", "value": "上海", "correction": False, "confidence": None}],
    "rejections": [{"reason": "secret", "detail": "a password is never stored", "evidence_event_ids": ["e-2"]}],
    "usage": {"extractor": "llm", "model": "m-1", "prompt_tokens": 120, "completion_tokens": 30},
}
"""A proposal as the extract activity stored it before the proposal had a type."""


def _accepted(client: TestClient, make_key: MakeKey, engine: Engine, *said: str) -> CommitRef:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    post(client, key, "s-1", *(say(f"m{i}", "user", text) for i, text in enumerate(said)))
    owner = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), key_id="test")
    with tenant_session(engine, tenant) as session:
        accept_commit(session, owner, "s-1", "c-1")
    return CommitRef(tenant, "s-1", "c-1", "alice")


def _row(engine: Engine, ref: CommitRef) -> tuple[SessionCommit, int, int]:
    """The commit, its session's committed_through, and how many summary versions the session has."""
    with tenant_session(engine, ref.tenant_id) as session:
        commit = session.execute(select(SessionCommit).where(SessionCommit.commit_id == ref.commit_id)).scalar_one()
        chat = session.execute(select(ChatSession).where(ChatSession.session_id == ref.session_id)).scalar_one()
        summaries = session.execute(select(func.count()).select_from(SessionSummary)).scalar_one()
        return commit, chat.committed_through, summaries


def test_an_old_rows_proposal_loads_and_is_stored_again_unchanged() -> None:
    assert Proposal.from_json(LEGACY_PROPOSAL).to_json() == LEGACY_PROPOSAL
    only_candidates = {"candidates": LEGACY_PROPOSAL["candidates"]}  # a row stored without refusals or usage
    loaded = Proposal.from_json(only_candidates)
    assert (loaded.rejections, loaded.usage) == ((), None)
    assert loaded.to_json() == {**only_candidates, "rejections": []}


def test_archiving_twice_archives_once(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    ref = _accepted(client, make_key, engine, "我住在上海。", "I prefer plain text answers.")
    with tenant_session(engine, ref.tenant_id) as session:
        commit_steps.archive(session, ref)
    first, _, summaries = _row(engine, ref)
    assert first.status == "archived" and first.summary_id is not None and summaries == 1
    with tenant_session(engine, ref.tenant_id) as session:  # a retried activity
        commit_steps.archive(session, ref)
    again, _, summaries = _row(engine, ref)
    assert (again.status, again.summary_id, summaries) == ("archived", first.summary_id, 1)


def test_a_commit_whose_owner_was_deleted_refuses_every_step(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    ref = _accepted(client, make_key, engine, "我住在上海。")
    with tenant_session(engine, ref.tenant_id) as session:
        bump_epoch(session, ref.tenant_id, "alice")
    with tenant_session(engine, ref.tenant_id) as session:
        commit_steps.archive(session, ref)
    commit, committed_through, summaries = _row(engine, ref)
    assert (commit.status, committed_through, summaries) == ("cancelled_by_deletion", 0, 0)  # stage given back
    proposal = Proposal.from_json(LEGACY_PROPOSAL)
    with tenant_session(engine, ref.tenant_id) as session:
        commit_steps.propose(session, ref, proposal)
        assert commit_steps.stage_to_extract(session, ref) is None
        assert commit_steps.persist(session, ref).status == "cancelled_by_deletion"
        failure = CommitFailure(ref, "extractor_unavailable", "down")
        assert commit_steps.fail(session, failure) == "cancelled_by_deletion"
    assert _row(engine, ref)[0].memories == {}


def test_the_steps_in_order_store_the_proposal_then_write_it_back(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    ref = _accepted(client, make_key, engine, "我住在上海。", "I prefer plain text answers.")
    with tenant_session(engine, ref.tenant_id) as session:
        commit_steps.archive(session, ref)
        stage = commit_steps.stage_to_extract(session, ref)
    assert stage is not None and len(stage.messages) == 2
    proposal = Proposal.gated(stage, RulesExtractor().extract(stage))
    assert proposal.candidates
    for _ in range(2):  # a retried propose stores the first answer once
        with tenant_session(engine, ref.tenant_id) as session:
            commit_steps.propose(session, ref, proposal)
    stored = _row(engine, ref)[0]
    assert stored.status == "extracted"
    assert stored.memories["proposed"] == proposal.to_json()
    assert set(stored.memories["proposed"]) == {"candidates", "rejections", "usage"}
    assert stored.memories["proposed"]["usage"] == {"extractor": "rules", "model": None, "prompt_tokens": 0,
                                                    "completion_tokens": 0}
    with tenant_session(engine, ref.tenant_id) as session:
        assert commit_steps.stage_to_extract(session, ref) is None  # moved past extraction
        done = commit_steps.persist(session, ref)
        assert done.status == "completed" and "proposed" not in done.memories
        assert done.stats["extractor"] == "rules" and done.stats["memories_extracted"] == len(proposal.candidates)
    with tenant_session(engine, ref.tenant_id) as session:  # a retried persist changes nothing
        assert commit_steps.persist(session, ref).memories == done.memories


def test_a_failure_asks_for_action_and_gives_the_stage_back_once(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    ref = _accepted(client, make_key, engine, "我住在上海。")
    failure = CommitFailure(ref, "extractor_unavailable", "the extractor could not be used: 503")
    with tenant_session(engine, ref.tenant_id) as session:
        commit_steps.archive(session, ref)
        assert commit_steps.fail(session, failure) == "failed_requires_action"
    commit, committed_through, _ = _row(engine, ref)
    assert committed_through == 0 and commit.error == failure.detail
    assert commit.reasons == [{"reason": "extractor_unavailable", "detail": failure.detail, "evidence_event_ids": []}]
    with tenant_session(engine, ref.tenant_id) as session:  # a retried fail keeps the commit's end
        assert commit_steps.fail(session, CommitFailure(ref, "extraction_failed", "other")) == "failed_requires_action"
    assert _row(engine, ref)[0].error == failure.detail
