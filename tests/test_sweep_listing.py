"""Sweeps visit the tenants with work, a page at a time, and continue as new before their history grows long.

On a database of its own (the listing reads every tenant), tenants are put in each state a sweep's rule
distinguishes; the listing of each sweep must name exactly the tenants for which the sweep's own per-tenant work
finds something — checked by running that work (in a transaction rolled back after), not by re-reading the
listing's conditions. Then a real knowledge-review sweep with a page of one tenant and a history budget of one
event runs through a chain of runs that visits every tenant with work, and no other.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text, update
from sqlalchemy.orm import Session

from activities.tenants import SweepKind, TenantActivities, TenantPageRequest
from api.devstack.postgres import PostgresInfo
from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from memory.db import enter_tenant, global_session, tenant_session
from memory.embedders.engine import MODEL_NAME
from memory.identity.tenants import tenant_page
from memory.knowledge.candidates import Author
from memory.knowledge.candidates import propose as knowledge_propose
from memory.knowledge.content import parse_proposal
from memory.knowledge.models import KnowledgeCandidate
from memory.knowledge.review import unreviewed
from memory.models import Memory
from memory.sessions.commits import CommitStatus
from memory.sessions.models import ChatSession, SessionCommit
from memory.sessions.policy import CommitPolicy, sweep_tenant
from memory.store.vectors import has_backlog, mark_unembeddable, pending_batch, store_vectors
from tests.conftest import auth
from tests.factories import key_in, scratch_stack
from tests.sessions.conftest import post, say
from tests.workers import ThreadWorker
from workflows.knowledge_review import KnowledgeReviewSweepInput, KnowledgeReviewSweepWorkflow
from workflows.sweeps import SweepPaging

POLICY = CommitPolicy(after_messages=0, after_tokens=0, idle_seconds=60)
LONG_AGO = datetime.now(UTC) - timedelta(hours=1)


@pytest.fixture(scope="module")
def stack(settings: Settings, postgres: PostgresInfo) -> Iterator[tuple[Settings, Engine]]:
    with scratch_stack(settings, postgres, "mnemo_sweeps") as scratch:
        yield scratch


def _memory(client: TestClient, key: str, content: str) -> str:
    answer = client.post("/memory-candidates", headers=auth(key), json={
        "category": "PROFILE", "space": "USER", "content": content, "source_level": "E2",
        "source": {"source_id": f"s-{uuid.uuid4().hex[:8]}", "source_type": "EXPLICIT_USER_STATEMENT",
                   "captured_at": "2026-06-01T00:00:00+00:00"}})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["memory_id"])


def _vectors(engine: Engine, tenant: str, model: str) -> None:
    """Store a vector from ``model`` for every head the tenant's backlog holds (the write path of the sweep)."""
    with tenant_session(engine, tenant) as session:
        pending = pending_batch(session, tenant, model, 100)
        assert store_vectors(session, tenant, model, [(p, [0.1] * 384) for p in pending]) == (len(pending), 0)


def _candidate(engine: Engine, tenant: str, claim: str, opened: datetime) -> KnowledgeCandidate:
    key_in(engine, tenant)
    with tenant_session(engine, tenant) as session:
        return knowledge_propose(session, Author(tenant, "alice"), parse_proposal(
            {"key": f"k.{uuid.uuid4().hex[:6]}", "claim": claim, "authority": "P1", "scope": {"type": "TENANT"},
             "source_refs": ["doc:handbook#1"]}), opened).candidate


def _states(client: TestClient, engine: Engine) -> None:
    """Tenants in every state the three rules tell apart (names say the state)."""
    keys = {t: key_in(engine, t) for t in ("e-new", "e-done", "e-stale", "e-crashed", "e-expired",
                                          "s-idle", "s-fresh", "s-stalled", "s-tried")}
    for tenant in ("e-new", "e-done", "e-stale", "e-crashed", "e-expired"):
        _memory(client, keys[tenant], f"The {tenant} tenant's user lives in Porto")
    _vectors(engine, "e-done", MODEL_NAME)
    _vectors(engine, "e-stale", "aaa-an-older-model")
    with tenant_session(engine, "e-crashed") as session:
        [crashed] = pending_batch(session, "e-crashed", MODEL_NAME, 10)
        assert mark_unembeddable(session, "e-crashed", MODEL_NAME, crashed)
    with tenant_session(engine, "e-expired") as session:
        session.execute(update(Memory).where(Memory.tenant_id == "e-expired").values(status="EXPIRED"))
    for tenant in ("s-idle", "s-fresh", "s-stalled", "s-tried"):
        post(client, keys[tenant], "chat", say("m1", "user", "I moved to Porto last spring."))
    accepted = client.post("/sessions/chat/commit", json={"commit_id": "c1"}, headers=auth(keys["s-stalled"]))
    assert accepted.status_code in (200, 202), accepted.text
    for tenant in ("s-idle", "s-stalled", "s-tried"):
        with tenant_session(engine, tenant) as session:
            session.execute(update(ChatSession).where(ChatSession.tenant_id == tenant)
                            .values(last_message_at=LONG_AGO))
            session.execute(update(SessionCommit).where(SessionCommit.tenant_id == tenant,
                                                        SessionCommit.status == CommitStatus.ACCEPTED.value)
                            .values(updated_at=LONG_AGO))
    with tenant_session(engine, "s-tried") as session:  # its idle stage's policy commit was tried, and failed
        [tried] = sweep_tenant(session, "s-tried", POLICY, datetime.now(UTC), 10)
        tried.status = CommitStatus.FAILED_REQUIRES_ACTION.value
    now = datetime.now(UTC)
    _candidate(engine, "k-open", "Reports are approved before they are sent", now - timedelta(minutes=5))
    _candidate(engine, "k-open-2", "Incidents are written up within two days", now - timedelta(minutes=5))
    _candidate(engine, "k-young", "Charts use the tenant's colours", now)
    started = _candidate(engine, "k-started", "Drafts are kept for a year", now - timedelta(minutes=5))
    with tenant_session(engine, "k-started") as session:
        session.execute(update(KnowledgeCandidate).where(KnowledgeCandidate.tenant_id == "k-started",
                                                         KnowledgeCandidate.candidate_id == started.candidate_id)
                        .values(review_started_at=now))


def _finds_work(engine: Engine, tenant: str, work: Callable[[Session], list[object]]) -> bool:
    """Whether the sweep's own per-tenant work finds something for ``tenant``; whatever it writes is rolled back."""
    with Session(engine) as session:
        session.begin()
        enter_tenant(session, tenant)
        found = bool(work(session))
        session.rollback()
    return found


def test_each_sweep_lists_exactly_the_tenants_its_work_finds_something_for(stack: tuple[Settings, Engine]) -> None:
    own, engine = stack
    with TestClient(create_app(own)) as client:
        _states(client, engine)
    with global_session(engine) as session:
        tenants = list(session.execute(text("SELECT tenant_id FROM tenants ORDER BY 1")).scalars())
    now = datetime.now(UTC)
    work: dict[SweepKind, Callable[[str], Callable[[Session], list[object]]]] = {
        SweepKind.EMBEDDING: lambda t: lambda s: list(pending_batch(s, t, MODEL_NAME, 1)),
        SweepKind.SESSION_COMMIT: lambda t: lambda s: list(sweep_tenant(s, t, POLICY, now, 100)),
        SweepKind.KNOWLEDGE_REVIEW: lambda t: lambda s: list(unreviewed(s, t, now, 1)),
    }
    activities = TenantActivities(engine, lambda: MODEL_NAME, POLICY)
    expected = {kind: [t for t in tenants if _finds_work(engine, t, finds(t))] for kind, finds in work.items()}
    assert expected == {  # the states are what their names say: the oracle is not vacuous
        SweepKind.EMBEDDING: ["e-new", "e-stale"],
        SweepKind.SESSION_COMMIT: ["s-idle", "s-stalled"],
        SweepKind.KNOWLEDGE_REVIEW: ["k-open", "k-open-2"],
    }
    for kind in work:
        assert activities.tenant_page(TenantPageRequest(kind, None, 1000)) == expected[kind], kind
        pages, after = [], None
        while page := activities.tenant_page(TenantPageRequest(kind, after, 1)):
            pages.append(page)
            after = page[-1]
        assert pages == [[t] for t in expected[kind]], kind
    assert activities.tenant_page(TenantPageRequest(SweepKind.EVERY, None, 1000)) == tenants
    with global_session(engine) as session:  # without the listing's setting, no tenant's rows are readable
        assert tenant_page(session, None, 1000, lambda tenant: has_backlog(tenant, MODEL_NAME)) == []


def test_a_sweep_pages_and_continues_as_new_visiting_only_tenants_with_work(stack: tuple[Settings, Engine]) -> None:
    own, engine = stack
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine),
                          commit_policy=POLICY, review_wait=(3600.0, 3600.0)).start()

    async def sweep() -> list[list[str]]:
        """Each run's per-tenant listings of unreviewed candidates, following the chain of runs."""
        client = await connect(own)
        workflow_id = f"ksweep-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(
            KnowledgeReviewSweepWorkflow.run, KnowledgeReviewSweepInput(paging=SweepPaging(page=1, history_budget=1)),
            id=workflow_id, task_queue=own.task_queue)
        await handle.result()
        runs: list[list[str]] = []
        run_id: str | None = handle.first_execution_run_id
        while run_id:
            history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
            visited, run_id = [], None
            for event in history.events:
                scheduled = event.activity_task_scheduled_event_attributes
                if scheduled.activity_type.name == "knowledge_unreviewed":
                    visited.append(client.data_converter.payload_converter.from_payloads(
                        scheduled.input.payloads)[0]["tenant_id"])
                if event.HasField("workflow_execution_continued_as_new_event_attributes"):
                    run_id = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            runs.append(visited)
        return runs

    try:
        runs = asyncio.run(sweep())
    finally:
        worker.stop()
    assert runs == [["k-open"], ["k-open-2"], []]
    with tenant_session(engine, "k-open-2") as session:
        assert session.query(KnowledgeCandidate).filter_by(tenant_id="k-open-2").one().review_started_at is not None
