"""The knowledge layer of a deletion (issue 27 §3): a candidate or published item resting on a deleted source.

Real PostgreSQL; the API's deletions run the real DeletionWorkflow on Temporal (tests/deletion/conftest.py).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text

from memory.db import tenant_session
from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.jobs import Layer
from memory.deletion.knowledge_layer import SOURCE_DELETED
from memory.deletion.layers import PURGERS
from memory.deletion.residue import matchers, scan_database
from memory.deletion.scope import ScopeType
from memory.identity.auth import PrincipalContext
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate
from tests.knowledge.published import open_candidate, published

NOW = datetime.now(UTC)
PRIVATE = "客户张三的报销发票原件一律寄到杭州仓库七号柜由李会计签收"
"""A memory's words that a promotion copied into knowledge."""


def _write(api: TestClient, key: str, content: str) -> str:
    response = api.post("/memory-candidates", json=candidate(content), headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


def _body(claim: str, *refs: str, key: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"claim": claim, "authority": "P1", "source_refs": list(refs),
                            "evidence": [{"ref": refs[0], "quote": claim}]}
    return body | ({"key": key} if key else {})


def _knowledge(api: TestClient, key: str, query: str) -> list[str]:
    response = api.post("/memory-query", json={"query": query}, headers=auth(key))
    assert response.status_code == 200, response.text
    return [k["knowledge_id"] for k in response.json()["knowledge"]]


def _seed(api: TestClient, make_key: MakeKey, engine: Engine) -> tuple[str, str, str, dict[str, Any]]:
    """A tenant where one memory is the only source of a candidate and an item, one of several of others."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice = make_key(tenant=tenant, user="alice")
    memory = _write(api, alice, PRIVATE)
    source = f"memory:{memory}"
    seeded = {
        "only_candidate": open_candidate(engine, tenant, _body(PRIVATE, source), NOW).candidate_id,
        "only_item": published(engine, tenant, _body(f"报销规定：{PRIVATE}", source, key="claims.receipts"), NOW),
        "shared_candidate": open_candidate(engine, tenant, _body("报销发票须附审批单", source, "doc:handbook#3"),
                                           NOW).candidate_id,
        "shared_item": published(engine, tenant, _body("报销须经财务审批", source, "doc:handbook#2",
                                                       key="claims.approval"), NOW),
    }
    return tenant, alice, memory, seeded


def test_deleting_the_only_source_withdraws_at_once_and_the_purge_scrubs_and_opens_a_rereview(
    api: TestClient, make_key: MakeKey, engine: Engine,
) -> None:
    tenant, alice, memory, seeded = _seed(api, make_key, engine)
    only, shared = seeded["only_item"], seeded["shared_item"]
    assert str(only.knowledge_id) in _knowledge(api, alice, "报销发票 杭州仓库")
    accepted = api.delete(f"/memories/{memory}", headers=auth(alice))
    assert accepted.status_code == 202, accepted.text
    # The barrier: the very next recall no longer tells it as fact; the item with another source stays.
    after = _knowledge(api, alice, "报销发票 杭州仓库 财务审批")
    assert str(only.knowledge_id) not in after and str(shared.knowledge_id) in after

    job = wait_for(api, alice, accepted.json()["job_id"], completed, timeout=60)
    assert job["fully_deleted"] is True and job["remaining_copies"] == []
    layer = next(layer for layer in job["layers"] if layer["layer"] == "knowledge")
    # The open candidate, and the approved one the item was published from (it holds the same words).
    assert layer["status"] == "done" and layer["evidence"]["candidates_withdrawn"] == 2
    with tenant_session(engine, tenant) as session:
        gone = session.get_one(KnowledgeCandidate, (tenant, seeded["only_candidate"]))
        assert (gone.status, gone.claim, gone.evidence, gone.source_refs) == ("WITHDRAWN", "", [], [])
        kept = session.get_one(KnowledgeCandidate, (tenant, seeded["shared_candidate"]))
        assert (kept.status, kept.source_refs) == ("PENDING_REVIEW", ["doc:handbook#3"]) and kept.evidence == []
        assert session.get_one(KnowledgeCandidate, (tenant, only.candidate_id)).claim == ""
        item = session.get_one(KnowledgeItem, (tenant, only.knowledge_id, 1))
        assert (item.status, item.withdrawn_reason, item.claim, item.search_text, item.embedding) == (
            "WITHDRAWN", SOURCE_DELETED, "", "", None)
        stays = session.get_one(KnowledgeItem, (tenant, shared.knowledge_id, 1))
        assert (stays.status, stays.source_refs) == ("ACTIVE", ["doc:handbook#2"])
        rereview = session.execute(select(KnowledgeCandidate).where(
            KnowledgeCandidate.origin == "REREVIEW")).scalar_one()
    assert rereview.status == "PENDING_REVIEW" and rereview.supersedes == only.knowledge_id
    assert rereview.origin_ref == f"knowledge:{only.knowledge_id}@1" and SOURCE_DELETED in rereview.claim
    assert "杭州" not in rereview.claim and rereview.source_refs == []


def _knowledge_copies(engine: Engine, tenant: str, job_id: uuid.UUID) -> set[str]:
    with tenant_session(engine, tenant) as session:
        found = scan_database(session, tenant, matchers(session, tenant, [job_id]), {job_id: "alice"})
    return {f"{c.table}.{c.column}" for c in found[job_id] if c.table.startswith("knowledge_")}


def test_the_residue_scan_finds_a_promoted_memorys_text_in_knowledge_until_the_layer_runs(
    api: TestClient, make_key: MakeKey, engine: Engine,
) -> None:
    tenant, _, memory, _ = _seed(api, make_key, engine)
    principal = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), "test")
    with tenant_session(engine, tenant) as session:  # the barrier alone: no workflow purges behind the test's back
        job = request_deletion(session, principal, "d-1", ScopeRequest(ScopeType.MEMORY, memory_id=uuid.UUID(memory)),
                               "sha").job
        session.execute(text("DELETE FROM deletion_outbox WHERE job_id = :j"), {"j": job.job_id})
    assert _knowledge_copies(engine, tenant, job.job_id) >= {
        "knowledge_candidates.claim", "knowledge_items.claim", "knowledge_items.search_text"}
    done = False
    while not done:
        with tenant_session(engine, tenant) as session:
            done = PURGERS[Layer.KNOWLEDGE](session, session.merge(job), 1).done
    assert _knowledge_copies(engine, tenant, job.job_id) == set()


def test_a_subject_deletion_withdraws_their_unapproved_candidates_and_leaves_no_name_on_kept_knowledge(
    api: TestClient, make_key: MakeKey, engine: Engine,
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    carol = make_key(tenant=tenant, user="carol")
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    pending = open_candidate(engine, tenant, _body("差旅住宿标准每晚六百元", "doc:travel#1"), NOW, author="carol")
    kept = published(engine, tenant, {**_body("差旅须提前三天申请", "doc:travel#2"), "key": "travel.apply"}, NOW)
    with tenant_session(engine, tenant) as session:
        session.execute(text("UPDATE knowledge_items SET author_user_id = 'carol'"))
    accepted = api.post("/deletion-requests", json={"deletion_request_id": "forget-carol",
                                                   "scope": {"type": "subject", "user_id": "carol"}},
                        headers=auth(admin))
    assert accepted.status_code == 202, accepted.text
    wait_for(api, admin, accepted.json()["job_id"], completed, timeout=60)
    with tenant_session(engine, tenant) as session:
        gone = session.get_one(KnowledgeCandidate, (tenant, pending.candidate_id))
        item = session.get_one(KnowledgeItem, (tenant, kept.knowledge_id, 1))
    assert (gone.status, gone.claim) == ("WITHDRAWN", "") and gone.author_user_id == "forgotten-user"
    assert (item.status, item.claim, item.author_user_id) == ("ACTIVE", "差旅须提前三天申请", "forgotten-user")
    assert carol  # her key existed: the subject is a user of the tenant
