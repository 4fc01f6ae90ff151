"""The rules a review of issue 27 found broken, each checked where it lives (real PostgreSQL): a deletion leaves
no copy of a deleted source's words in knowledge (whatever other sources a row names, and never through another
candidate's conflicts); a weaker version never replaces a stronger one unseen; a revision keeps its origin's
ceiling; a re-review notice is never published; a candidate cannot supersede one item while another holds its key."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text

from memory.db import tenant_session
from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.jobs import Layer
from memory.deletion.layers import PURGERS
from memory.deletion.residue import matchers, scan_database
from memory.deletion.scope import ScopeType
from memory.errors import Conflict
from memory.identity.auth import PrincipalContext
from memory.knowledge import review
from memory.knowledge.candidates import Author, get_candidate, propose
from memory.knowledge.content import parse_proposal
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.knowledge.review import ReviewRequest
from memory.knowledge.sources import promotion
from memory.models import DeletionJob, Memory
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.knowledge.published import open_candidate, published

NOW = datetime.now(UTC)
PRIVATE = "客户王五的合同原件一律寄到苏州仓库九号柜由赵会计签收"


def _tenant(make_key: MakeKey) -> str:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    make_key(tenant=tenant, user="alice")
    return tenant


def _private_memory(client: TestClient, make_key: MakeKey, tenant: str) -> str:
    written = client.post("/memory-candidates", json=candidate(PRIVATE), headers=auth(make_key(tenant=tenant)))
    assert written.status_code == 201, written.text
    return str(written.json()["memory_id"])


def _delete_and_purge(engine: Engine, tenant: str, memory_id: str) -> DeletionJob:
    """The barrier, then the knowledge layer to its end (the workflow's other layers are not needed here)."""
    principal = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), "test")
    with tenant_session(engine, tenant) as session:
        job = request_deletion(session, principal, f"d-{uuid.uuid4().hex[:6]}",
                               ScopeRequest(ScopeType.MEMORY, memory_id=uuid.UUID(memory_id)), "sha").job
        session.execute(text("DELETE FROM deletion_outbox WHERE job_id = :j"), {"j": job.job_id})
    done = False
    while not done:
        with tenant_session(engine, tenant) as session:
            done = PURGERS[Layer.KNOWLEDGE](session, session.merge(job), 10).done
    return job


def _knowledge_copies(engine: Engine, tenant: str, job: DeletionJob) -> set[str]:
    """Where the residue scan (independent of the purge's selection) still finds the deleted words in knowledge."""
    with tenant_session(engine, tenant) as session:
        found = scan_database(session, tenant, matchers(session, tenant, [job.job_id]), {job.job_id: "alice"})
    return {f"{c.table}.{c.column}" for c in found[job.job_id] if c.table.startswith("knowledge_")}


@pytest.mark.parametrize("origin", ["API", "SESSION_COMMIT"])
def test_a_deleted_sources_words_go_even_when_other_sources_remain(
        client: TestClient, make_key: MakeKey, engine: Engine, origin: str) -> None:
    tenant = _tenant(make_key)
    memory_id = _private_memory(client, make_key, tenant)
    opened = open_candidate(engine, tenant, {"claim": PRIVATE, "authority": "P3", "source_refs": [
        f"memory:{memory_id}", "session:s-1", "commit:c-1"]}, NOW)
    with tenant_session(engine, tenant) as session:
        session.execute(text("UPDATE knowledge_candidates SET origin = :o"), {"o": origin})
    job = _delete_and_purge(engine, tenant, memory_id)
    with tenant_session(engine, tenant) as session:
        row = session.get_one(KnowledgeCandidate, (tenant, opened.candidate_id))
        assert (row.status, row.claim) == ("WITHDRAWN", "")
    assert _knowledge_copies(engine, tenant, job) == set()


def test_conflicts_name_items_and_hold_none_of_their_words(
        client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = _tenant(make_key)
    memory_id = _private_memory(client, make_key, tenant)
    item = published(engine, tenant, {"key": "contracts.mail", "claim": f"规定：{PRIVATE}", "authority": "P1",
                                      "source_refs": [f"memory:{memory_id}"]}, NOW)
    other = open_candidate(engine, tenant, {"key": "contracts.mail", "claim": "合同寄总部", "authority": "P1",
                                            "source_refs": ["doc:x#1"]}, NOW)
    assert other.conflicts == [{"knowledge_id": str(item.knowledge_id), "version": 1, "key": "contracts.mail",
                                "authority": "P1"}]
    job = _delete_and_purge(engine, tenant, memory_id)
    assert _knowledge_copies(engine, tenant, job) == set()


def _approve(engine: Engine, tenant: str, candidate_id: uuid.UUID, authority: str | None = None) -> review.Decided:
    with tenant_session(engine, tenant) as session:
        c = get_candidate(session, tenant, candidate_id)
        request = ReviewRequest("approve", c.content_sha256, c.state_version, "rita", ["knowledge_reviewer"],
                                authority=authority)
        return review.decide(session, tenant, candidate_id, request, NOW, None)


def test_a_weaker_version_never_replaces_a_stronger_one_unseen(engine: Engine, make_key: MakeKey) -> None:
    tenant = _tenant(make_key)
    policy = published(engine, tenant, {"key": "k.policy", "claim": "发布须经财务审批", "authority": "P1",
                                        "source_refs": ["doc:a#1"]}, NOW)
    weaker = open_candidate(engine, tenant, {"key": "k.policy", "claim": "发布无需审批", "authority": "P3",
                                             "source_refs": ["doc:a#2"]}, NOW)
    with pytest.raises(Conflict) as refused:
        _approve(engine, tenant, weaker.candidate_id)
    assert refused.value.code == "knowledge_authority_downgrade"
    decided = _approve(engine, tenant, weaker.candidate_id, authority="P1")  # the reviewer classifies it
    assert decided.item is not None and (decided.item.version, decided.item.authority) == (2, "P1")
    assert decided.item.knowledge_id == policy.knowledge_id


def test_an_agents_proposal_is_p3_until_a_reviewer_says_otherwise(engine: Engine, make_key: MakeKey) -> None:
    tenant = _tenant(make_key)
    with tenant_session(engine, tenant) as session:
        opened = propose(session, Author(tenant, "alice", "agent-7"), parse_proposal(
            {"claim": "报告无需财务审批", "authority": "P0", "source_refs": ["doc:a#1"]}), NOW).candidate
    assert opened.authority == "P3"
    decided = _approve(engine, tenant, opened.candidate_id, authority="P2")
    assert decided.item is not None and decided.item.authority == "P2"


def test_a_revision_keeps_its_origins_ceiling_and_target(engine: Engine, make_key: MakeKey) -> None:
    tenant = _tenant(make_key)
    opened = open_candidate(engine, tenant, {"claim": "模型总结：报告无需财务审批", "authority": "P3",
                                             "source_refs": ["session:s1"]}, NOW)
    with tenant_session(engine, tenant) as session:
        session.execute(text("UPDATE knowledge_candidates SET status = 'CHANGES_REQUESTED', "
                             "origin = 'SESSION_COMMIT'"))
    with tenant_session(engine, tenant) as session:
        revised = review.revise(session, Author(tenant, "alice"), opened.candidate_id, 1, parse_proposal(
            {"claim": "报告无需财务审批", "authority": "P0", "source_refs": ["session:s1"], "target": "skill",
             "skill_name": "monthly-report"}), NOW)
        assert (revised.origin, revised.authority) == ("SESSION_COMMIT", "P3")
        assert (revised.target, revised.skill_name) == ("skill", "monthly-report")


def test_approving_a_rereview_notice_publishes_nothing(
        client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = _tenant(make_key)
    memory_id = _private_memory(client, make_key, tenant)
    published(engine, tenant, {"key": "contracts.rule", "claim": "合同一律寄总部", "authority": "P0",
                               "source_refs": [f"memory:{memory_id}"]}, NOW)
    _delete_and_purge(engine, tenant, memory_id)
    with tenant_session(engine, tenant) as session:
        notice = session.execute(select(KnowledgeCandidate.candidate_id).where(
            KnowledgeCandidate.origin == "REREVIEW")).scalar_one()
    decided = _approve(engine, tenant, notice)
    assert decided.item is None and decided.candidate.status == "APPROVED"
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(KnowledgeItem.status)).scalars().all() == ["WITHDRAWN"]


def test_superseding_one_item_under_anothers_key_is_refused(engine: Engine, make_key: MakeKey) -> None:
    tenant = _tenant(make_key)
    a = published(engine, tenant, {"key": "k.a", "claim": "甲规则", "authority": "P1", "source_refs": ["doc:a#1"]},
                  NOW)
    published(engine, tenant, {"key": "k.b", "claim": "乙规则", "authority": "P1", "source_refs": ["doc:b#1"]}, NOW)
    with pytest.raises(Conflict) as refused:
        open_candidate(engine, tenant, {"key": "k.b", "supersedes": str(a.knowledge_id), "claim": "丙规则",
                                        "authority": "P1", "source_refs": ["doc:c#1"]}, NOW)
    assert refused.value.code == "knowledge_supersedes_conflict"


def test_approving_when_another_item_took_the_key_meanwhile_is_refused(engine: Engine, make_key: MakeKey) -> None:
    """Checked again at approval: a candidate that supersedes one item while, since it opened, another item took
    its key would otherwise publish a second active version of the key (a database error, retried)."""
    tenant = _tenant(make_key)
    keyless = published(engine, tenant, {"claim": "月报在第五个工作日发出", "authority": "P1",
                                         "source_refs": ["doc:a#1"]}, NOW)
    waiting = open_candidate(engine, tenant, {"key": "report.send_day", "supersedes": str(keyless.knowledge_id),
                                              "claim": "月报在第三个工作日发出", "authority": "P1",
                                              "source_refs": ["doc:a#2"]}, NOW)
    published(engine, tenant, {"key": "report.send_day", "claim": "月报在第四个工作日发出", "authority": "P1",
                               "source_refs": ["doc:b#1"]}, NOW)
    with pytest.raises(Conflict) as refused:
        _approve(engine, tenant, waiting.candidate_id)
    assert refused.value.code == "knowledge_supersedes_conflict"


def test_the_barrier_withdraws_at_once_what_holds_a_deleted_sources_words(
        client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    """Before any purge runs: an item quoting the deleted memory (with another source too) leaves recall, and an
    open candidate quoting it can no longer be approved."""
    tenant = _tenant(make_key)
    memory_id = _private_memory(client, make_key, tenant)
    refs = [f"memory:{memory_id}", "doc:handbook#2"]
    item = published(engine, tenant, {"key": "contracts.where", "claim": f"规定：{PRIVATE}", "authority": "P1",
                                      "source_refs": refs}, NOW)
    pending = open_candidate(engine, tenant, {"claim": f"建议：{PRIVATE}", "authority": "P2", "source_refs": refs},
                             NOW)
    principal = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), "test")
    with tenant_session(engine, tenant) as session:
        request_deletion(session, principal, "d-now", ScopeRequest(ScopeType.MEMORY, memory_id=uuid.UUID(memory_id)),
                         "sha")
    with tenant_session(engine, tenant) as session:
        assert session.get_one(KnowledgeItem, (tenant, item.knowledge_id, 1)).status == "WITHDRAWN"
        assert session.get_one(KnowledgeCandidate, (tenant, pending.candidate_id)).status == "WITHDRAWN"


def test_a_models_inference_is_promoted_as_p3_whoever_promotes_it() -> None:
    inferred = Memory(memory_id=uuid.uuid4(), version=1, category="CASE", status="ACTIVE", content="重启网关可恢复",
                      key=None, project_id=None, source_id="session:s-1", evidence_refs=[], source_level="E4")
    assert promotion(inferred, {"authority": "P2"}).authority.value == "P3"
    stated = Memory(memory_id=uuid.uuid4(), version=1, category="CASE", status="ACTIVE", content="重启网关可恢复",
                    key=None, project_id=None, source_id="session:s-1", evidence_refs=[], source_level="E2")
    assert promotion(stated, {"authority": "P2"}).authority.value == "P2"
