"""Opening candidates and publishing them against the real database: redaction before storage, duplicates,
conflicts shown (never decided), versions that supersede, search columns written with the publication."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import Engine

from memory.db import tenant_session
from memory.errors import Conflict, InvalidInput, NotFound
from memory.identity.auth import create_api_key
from memory.knowledge.candidates import Author, get_candidate, propose
from memory.knowledge.content import parse_proposal
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.knowledge.publish import publish, versions

NOW = datetime(2026, 12, 3, tzinfo=UTC)
POLICY = {"key": "report.publish_policy", "claim": "报告发布前必须获得财务审批", "authority": "P0",
          "scope": {"type": "TENANT"}, "source_refs": ["doc:finance/handbook#4.2"],
          "evidence": [{"quote": "所有对外报告须经财务审批（联系 13800138000）", "ref": "doc:finance/handbook#4.2"}]}


@pytest.fixture
def tenant(engine: Engine) -> str:
    tenant_id = f"t-{uuid.uuid4().hex[:12]}"
    with tenant_session(engine, tenant_id) as session:
        create_api_key(session, tenant_id=tenant_id, user_id="alice", roles=["memory_writer"])
    return tenant_id


def _open(engine: Engine, tenant: str, body: Mapping[str, Any], user: str = "alice") -> KnowledgeCandidate:
    with tenant_session(engine, tenant) as session:
        return propose(session, Author(tenant, user), parse_proposal(body), NOW).candidate


def _approve(engine: Engine, tenant: str, candidate_id: uuid.UUID) -> KnowledgeItem:
    with tenant_session(engine, tenant) as session:
        return publish(session, get_candidate(session, tenant, candidate_id, lock=True), "rita", NOW, None)


def test_the_stored_candidate_holds_no_redacted_value_anywhere(engine: Engine, tenant: str) -> None:
    candidate = _open(engine, tenant, POLICY)
    assert candidate.status == "PENDING_REVIEW" and candidate.redactions == [
        {"kind": "phone", "path": "evidence/0/quote"}]
    with tenant_session(engine, tenant) as session:
        rows = session.execute(text("SELECT row_to_json(c)::text FROM knowledge_candidates c")).scalars().all()
        audit = session.execute(text("SELECT detail::text FROM audit_log")).scalars().all()
    assert rows and all("13800138000" not in r for r in [*rows, *audit])


def test_a_published_claim_is_not_proposed_again_and_a_different_one_is_a_conflict(engine: Engine,
                                                                                     tenant: str) -> None:
    first = _approve(engine, tenant, _open(engine, tenant, POLICY).candidate_id)
    with pytest.raises(Conflict) as refused:
        _open(engine, tenant, {**POLICY, "claim": " 报告发布前必须获得财务审批 "})
    assert refused.value.code == "knowledge_already_published"
    other = _open(engine, tenant, {**POLICY, "claim": "报告发布前须经法务审批"})
    assert [c["knowledge_id"] for c in other.conflicts] == [str(first.knowledge_id)]
    project = _open(engine, tenant, {**POLICY, "scope": {"type": "PROJECT", "project_id": "p1"}})
    assert project.conflicts == [] and project.duplicates == []


def test_approving_a_conflicting_candidate_supersedes_the_old_version(engine: Engine, tenant: str) -> None:
    v1 = _approve(engine, tenant, _open(engine, tenant, POLICY).candidate_id)
    v2 = _approve(engine, tenant, _open(engine, tenant, {**POLICY, "claim": "发布前须经财务与法务审批"}).candidate_id)
    assert (v2.knowledge_id, v2.version, v2.supersedes_version) == (v1.knowledge_id, 2, 1)
    with tenant_session(engine, tenant) as session:
        assert [(i.version, i.status) for i in versions(session, tenant, v1.knowledge_id)] == [
            (2, "ACTIVE"), (1, "SUPERSEDED")]
        hits = session.execute(select(KnowledgeItem.version).where(
            KnowledgeItem.tokens.op("@@")(text("to_tsquery('simple', '法务')")))).scalars().all()
    assert hits == [2]


def test_near_duplicates_are_listed_with_their_similarity(engine: Engine, tenant: str) -> None:
    claim = "Reports need finance approval before publishing"
    published = _open(engine, tenant, {**POLICY, "key": None, "claim": claim})
    _approve(engine, tenant, published.candidate_id)
    near = _open(engine, tenant, {**POLICY, "key": None, "claim": claim + " (always)"})
    assert near.duplicates and 0.6 <= near.duplicates[0]["similarity"] < 1.0


def test_every_problem_is_named_by_path() -> None:
    with pytest.raises(InvalidInput) as bad:
        parse_proposal({"claim": "", "authority": "P9", "scope": {"type": "PROJECT"}, "source_refs": ["nope"],
                        "validity": {"from": "2026-01-01"}, "colour": 1})
    assert set(bad.value.details["problems"]) == {
        "claim", "authority", "scope/project_id", "source_refs/0", "validity/from", "colour"}


def test_an_incident_keeps_failed_attempts_marked_and_derives_its_claim() -> None:
    proposal = parse_proposal({"authority": "P2", "source_refs": ["ticket:INC-7"], "structured": {
        "kind": "incident", "symptom": "TLS handshake fails for api.example.com",
        "root_cause": "the intermediate certificate was missing", "fix": "install the full certificate chain",
        "verification": "openssl s_client shows a complete chain", "applicable_versions": ["gateway 2.x"],
        "attempts": [{"action": "restart the service", "outcome": "failed"},
                     {"action": "clear the cache", "outcome": "failed"},
                     {"action": "regenerate the certificate", "outcome": "temporary"},
                     {"action": "install the full chain", "outcome": "fixed"}]}})
    assert proposal.structured is not None
    assert [a["outcome"] for a in proposal.structured["attempts"]] == ["failed", "failed", "temporary", "fixed"]
    assert "intermediate certificate" in proposal.claim
    with pytest.raises(InvalidInput) as whole_ticket:
        parse_proposal({"authority": "P2", "source_refs": ["ticket:INC-7"], "claim": "x" * 5000})
    assert "claim" in whole_ticket.value.details["problems"]


def test_superseding_an_item_of_another_scope_is_a_404(engine: Engine, tenant: str) -> None:
    item = _approve(engine, tenant, _open(engine, tenant, POLICY).candidate_id)
    with pytest.raises(NotFound):
        _open(engine, tenant, {**POLICY, "claim": "new", "supersedes": str(item.knowledge_id),
                               "scope": {"type": "PROJECT", "project_id": "p1"}})
