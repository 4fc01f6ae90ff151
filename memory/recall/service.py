"""Recall's one entry point: what a caller asks, in, the audited memory bundle, out.

:func:`recall` runs the whole pipeline for one request inside the caller's transaction: the plan
(:mod:`memory.recall.plan`), the hard filters (:mod:`memory.store.visibility`: the caller never sees
another tenant's or another user's memory, nor a deleted one), the candidates, the re-read, the
scores, the rank, the conflicts and the budget (:func:`memory.recall.bundle.build_bundle`), then the
``MEMORY_BUNDLE_BUILT`` audit event and the usage counters.

What lies outside the database is handed in by the adapter: the live task state a RESUME_TASK
recall needs, or the caller's resumable tasks when it names none (read before the transaction,
:func:`plan_for` says whether) and the place the query embedding is computed (:class:`QueryEmbedding`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from memory.db import tenant_session
from memory.embedders.rerank import Reranker
from memory.enums import Category, Space
from memory.errors import Conflict, MnemoError
from memory.identity.auth import PrincipalContext
from memory.recall import audit
from memory.recall.bundle import build_bundle
from memory.recall.bundle_types import Bundle, TaskFound
from memory.recall.plan import (
    DEFAULT_CANDIDATES,
    DEFAULT_INJECT,
    DEFAULT_SKILL_BUDGET,
    DEFAULT_TOKEN_BUDGET,
    Intent,
    RecallPlan,
    SourceType,
    classify_intent,
    make_plan,
)
from memory.recall.request import RecallRequest
from memory.recall.reread import snapshot_revision
from memory.recall.stages import Stage, StageClock
from memory.sessions.constraints import temporary_constraints
from memory.store.usage import mark_used_ids
from memory.store.visibility import QueryFilters

MIN_REVISION_WAIT_SECONDS = 2.0


@dataclass(frozen=True)
class RecallOptions:
    """How to recall, as the caller asked: these only narrow or steer. Identity is the principal's."""

    limit: int = DEFAULT_INJECT
    """How many memories may be injected."""
    candidate_limit: int = DEFAULT_CANDIDATES
    token_budget: int = DEFAULT_TOKEN_BUDGET
    skill_token_budget: int = DEFAULT_SKILL_BUDGET
    """OPERATE: the skills' own quota, apart from ``token_budget`` (the memories')."""
    categories: tuple[Category, ...] = ()
    spaces: tuple[Space, ...] = ()
    project_id: str | None = None
    session_id: str | None = None
    purpose: str | None = None
    intent: Intent | None = None
    """None: :func:`memory.recall.plan.classify_intent` decides."""
    task_id: str | None = None
    request_constraints: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    min_relevance: float = 0.05
    explain: bool = False
    trace_id: str | None = None
    """None: a new one."""
    retrieval: str = "hybrid"

    @property
    def filters(self) -> QueryFilters:
        return QueryFilters(self.categories, self.spaces, self.project_id, self.session_id, self.purpose)


class QueryEmbedding(Protocol):
    """Where a recall's query embedding is computed (the API: its per-tenant fair lanes of engines)."""

    @property
    def model(self) -> str: ...

    def submit(self, tenant_id: str, text: str) -> Future[list[float]]: ...


class SourceUnavailable(MnemoError):
    """A source the plan requires (the live task state) cannot be read now: a 503 with Retry-After."""

    code = "required_source_unavailable"
    http_status = 503

    def __init__(self, message: str) -> None:
        super().__init__(message, details={"retry_after_seconds": 5})


class RevisionNotReached(Conflict):
    code = "revision_not_reached"


def plan_for(query: str, options: RecallOptions) -> RecallPlan:
    """The recall plan of a request (deterministic); an impossible one is an :class:`InvalidInput`."""
    intent = options.intent or classify_intent(query, options.task_id)
    return make_plan(intent, task_id=options.task_id, candidate_limit=max(options.candidate_limit, options.limit),
                     inject_limit=options.limit, token_budget=options.token_budget,
                     skill_budget=options.skill_token_budget)


def request_constraints(query: str, plan: RecallPlan, asked: Mapping[str, str]) -> dict[str, str]:
    """This request's constraints: those asked for in the body, over those a resume says in words ("继续上次报告，
    这次不要 Markdown，直接用纯文本" → plain text for this answer only, never a stored preference).

    Only a resume reads the query this way: there the query is the user's own request to the agent, where an
    ANSWER query may merely be about formats ("what did I say about Markdown?")."""
    spoken = temporary_constraints(query) if plan.intent is Intent.RESUME_TASK else {}
    return {**spoken, **asked}


def recall(
    session: Session,
    principal: PrincipalContext,
    query: str,
    now: datetime,
    options: RecallOptions,
    *,
    task: TaskFound | None = None,
    embedding: QueryEmbedding | None = None,
    reranker: Reranker | None = None,
) -> Bundle:
    """The memory bundle of ``query`` for ``principal`` at ``now``, audited and counted as used.

    ``task``: what the task source read, when :func:`plan_for` reads :attr:`SourceType.TASK_STATE`.
    ``embedding``: without one, recall is lexical only. The embedding starts at once and is awaited
    by the pipeline after its lexical sources, so the two overlap. ``reranker``: the rerank stage (None: off).
    """
    plan = plan_for(query, options)
    vector = None
    if embedding is not None and plan.reads(SourceType.MEMORY) is not None and options.retrieval != "lexical":
        vector = embedding.submit(principal.tenant_id, query)
    try:
        request = RecallRequest(
            query=query, plan=plan, filters=options.filters,
            request_constraints=request_constraints(query, plan, options.request_constraints), keys=options.keys,
            task_state=task.state if task else None, task_candidates=task.candidates if task else None,
            query_vector=vector,
            model=embedding.model if embedding is not None and vector is not None else None,
            min_relevance=options.min_relevance, explain=options.explain, retrieval=options.retrieval,
            reranker=reranker, **({"trace_id": options.trace_id} if options.trace_id else {}),
        )
        clock = StageClock()
        outcome = build_bundle(session, principal, request, now, clock)
        audit.record_bundle(session, principal, query, outcome.bundle, outcome.filtered, options.purpose)
        mark_used_ids(session, principal.tenant_id, [s.memory.memory_id for s in outcome.selected], now)
        clock.end(Stage.AUDIT)
    finally:
        if vector is not None:
            vector.cancel()  # a recall that failed before needing it gives its place in the queue back
    return outcome.bundle


def wait_for_revision(engine: Engine, tenant_id: str, min_revision: int) -> None:
    """Read-your-writes: a bounded wait for ``min_revision``, then a clear answer with the current one."""
    deadline = time.monotonic() + MIN_REVISION_WAIT_SECONDS
    while True:
        with tenant_session(engine, tenant_id) as session:
            current = snapshot_revision(session)
        if current >= min_revision:
            return
        if time.monotonic() >= deadline:
            raise RevisionNotReached(
                f"this store is at revision {current}, not yet {min_revision}; retry shortly",
                details={"current_revision": current, "min_revision": min_revision},
            )
        time.sleep(0.05)
