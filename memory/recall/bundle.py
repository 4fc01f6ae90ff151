"""The recall pipeline, stage by stage, ending in a memory bundle (seed 003 §12, seed 001 §6.4).

scope → hard filters → candidates (capped per source) → authoritative re-read →
score → stable rank → stale/conflicts → de-dup by source → budget → bundle.
Every stage is a function of its own module; this one only wires them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, DateTime, Select, Text, and_, any_, bindparam, case, literal, null, select, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID, Insert, insert
from sqlalchemy.orm import Session

from memory.auth import PrincipalContext
from memory.embedders.engine import EmbeddingUnavailable
from memory.embedders.health import count_failure
from memory.embedders.schema import other_model_vectors
from memory.enums import Space
from memory.errors import InvalidInput
from memory.models import Memory, MemorySearch, MemoryUsage
from memory.recall import candidates as cand
from memory.recall.conflicts import resolve, stale_against_task
from memory.recall.filters import filtered_by_reason
from memory.recall.plan import RecallPlan, SourceType
from memory.recall.preferences import effective_preferences, stored_preferences
from memory.recall.ranking import stable_rank
from memory.recall.rerank import Reranker, rerank
from memory.recall.scoring import Evidence, Scored, score_pool
from memory.recall.stages import Stage, StageClock
from memory.text import normalize, tokens
from memory.tokens import count_tokens
from memory.visibility import NOW, QueryFilters, hard_filters

EMBEDDING_WAIT_SECONDS = 30.0
"""How long a bundle waits for its query embedding (queued behind others on the one embedding thread)."""


@dataclass(frozen=True)
class RecallRequest:
    query: str
    plan: RecallPlan
    filters: QueryFilters = field(default_factory=QueryFilters)
    request_constraints: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    task_state: Mapping[str, Any] | None = None
    query_vector: list[float] | Future[list[float]] | None = None
    """The query's embedding, or its computation still running (awaited after the lexical sources)."""
    model: str | None = None
    min_relevance: float = 0.05
    """Below this, a candidate is reported as not applicable rather than injected to fill the top-k."""
    explain: bool = False
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    retrieval: str = "hybrid"
    """``hybrid`` (every source), ``lexical`` (key, full text, trigram) or ``semantic`` (vector only)."""
    reranker: Reranker | None = None
    """The rerank stage's endpoint (None: off)."""

    def vector(self) -> list[float] | None:
        """The query embedding, waiting (a bounded time) if it is still being computed."""
        if isinstance(self.query_vector, Future):
            try:
                return self.query_vector.result(timeout=EMBEDDING_WAIT_SECONDS)
            except FutureTimeout as exc:
                raise EmbeddingUnavailable(
                    f"the query embedding took longer than {EMBEDDING_WAIT_SECONDS:.0f} s; retry, "
                    "or ask with retrieval=lexical"
                ) from exc
        return self.query_vector


@dataclass
class Outcome:
    bundle: dict[str, Any]
    filtered: dict[str, int]
    selected: list[Scored]


def vector_or_warning(request: RecallRequest) -> tuple[list[float] | None, list[str]]:
    """The query vector; if its model cannot give it, none and a warning saying so (and a count).

    The vector source is optional in a ``hybrid`` recall: the bundle is lexical only and says it. In a
    ``semantic`` one it is the only source asked for: the failure is the answer (503), never an empty bundle.
    """
    try:
        return request.vector(), []
    except EmbeddingUnavailable as exc:
        count_failure("query_embedding", exc.code)
        if request.retrieval == "semantic":
            raise
        return None, [f"{exc.code}: the embedding model failed, so this bundle was recalled without the vector "
                      f"source (lexical only): {exc.message}"]


REEMBEDDING = ("reembedding_in_progress: some memories still carry vectors of another embedding model; until the "
               "embedding sweep has re-embedded them they are found by the lexical sources only")


def snapshot_revision(session: Session) -> int:
    return int(session.execute(text("SELECT last_value FROM mnemo_revision_seq")).scalar_one())


@dataclass(frozen=True)
class Current:
    """A candidate's source row as re-read, the cosine of its still-valid vector, and its usage."""

    memory: Memory
    cosine: float | None
    active_count: int
    last_used_at: datetime | None


def reread(
    session: Session, principal: PrincipalContext, filters: QueryFilters, found: list[cand.Candidate],
    query_vector: str | None, model: str | None, now: datetime,
) -> dict[tuple[uuid.UUID, int], Current]:
    """The source rows again, under every hard filter, with the cosine of a vector that is still valid.

    ``query_vector`` is the text of :func:`memory.recall.candidates.vector_text` (or None: no cosines).
    """
    if not found:
        return {}
    with_cosine = query_vector is not None and model is not None
    parameters = {"now": now, "ids": [c.memory_id for c in found]}
    if with_cosine:
        parameters |= {"query_vector": query_vector, "model": model}
    rows = session.execute(_reread_statement(principal, filters, with_cosine), parameters).all()
    wanted = {(c.memory_id, c.version) for c in found}
    # A vector without direction (all zeros) has no cosine: pgvector answers NaN, which would poison every
    # z-score of the pool and is not JSON. It counts as no vector.
    return {(m.memory_id, m.version): Current(m, float(c) if c is not None and math.isfinite(c) else None,
                                              count or 0, used)
            for m, c, count, used in rows if (m.memory_id, m.version) in wanted}


@lru_cache(maxsize=256)
def _reread_statement(principal: PrincipalContext, filters: QueryFilters, with_cosine: bool) -> Select:  # type: ignore[type-arg]
    cosine: ColumnElement[Any] = null()
    if with_cosine:
        valid = and_(
            MemorySearch.embedding.is_not(None), MemorySearch.embedding_model == bindparam("model", type_=Text),
            MemorySearch.embedding_revision == Memory.revision, MemorySearch.version == Memory.version,
        )
        cosine = case((valid, literal(1.0) - MemorySearch.embedding.cosine_distance(cand.query_vector_param())),
                      else_=null())
    return (
        select(Memory, cosine.label("cosine"), MemoryUsage.active_count, MemoryUsage.last_used_at)
        .outerjoin(MemorySearch,
                   and_(MemorySearch.tenant_id == Memory.tenant_id, MemorySearch.memory_id == Memory.memory_id))
        .outerjoin(MemoryUsage,
                   and_(MemoryUsage.tenant_id == Memory.tenant_id, MemoryUsage.memory_id == Memory.memory_id))
        .where(
            Memory.tenant_id == principal.tenant_id,
            # One array parameter, not an IN list of pairs: the statement text is the same for any number of
            # candidates. A candidate whose version changed is dropped by the caller's version check.
            Memory.memory_id == any_(bindparam("ids", type_=ARRAY(UUID(as_uuid=True)))),
            hard_filters(principal, filters, NOW),
        )
    )


def _dedupe_by_source(ranked: list[Scored]) -> tuple[list[Scored], list[dict[str, Any]]]:
    """The same statement from the same source once: the higher-ranked copy stays."""
    seen: set[tuple[str, str]] = set()
    kept, decisions = [], []
    for item in ranked:
        key = (item.memory.source_id, " ".join(normalize(item.memory.content).split()))
        if key in seen:
            decisions.append({"key": item.memory.key, "reason": "DUPLICATE_OF_SOURCE", "winner": None,
                              "suppressed": {"memory_id": str(item.memory.memory_id), "version": item.memory.version},
                              "persistent_change": False})
            continue
        seen.add(key)
        kept.append(item)
    return kept, decisions


def _not_applicable(s: Scored, request: RecallRequest) -> str | None:
    """Why a ranked memory is not worth injecting, or None. An exact key match always is. Below the absolute
    ``min_relevance`` it is not; nor, in a hybrid recall with a floor, is a memory the words did not find whose
    vector is weaker than this recall's average candidate (a negative score): e5 puts unrelated short texts at
    a cosine of 0.78-0.83, as close as a true paraphrase, so only the comparison tells them apart.
    ``min_relevance`` 0 keeps every candidate (the benchmarks' setting)."""
    if "key" in s.sources:
        return None
    if s.breakdown.relevance < request.min_relevance:
        return "below_relevance_floor"
    if request.min_relevance > 0 and request.retrieval == "hybrid" and s.sources == {"vector"} \
            and s.breakdown.total < 0:
        return "vector_only_below_average"
    return None


def item_of(s: Scored) -> dict[str, Any]:
    m, b = s.memory, s.breakdown
    scope = f"project {m.project_id}" if m.project_id else ("session " + m.session_id if m.session_id else "global")
    purposes = f"; purposes {', '.join(m.allowed_purposes)}" if m.allowed_purposes else ""
    return {
        "memory_id": str(m.memory_id), "version": m.version, "category": m.category, "status": m.status,
        "space": m.space, "key": m.key, "content": m.content, "abstract": m.abstract,
        "applicability": f"{m.space.lower()} memory, {scope}{purposes}",
        "source_refs": [m.source_id, *m.evidence_refs], "source_level": m.source_level,
        "observed_at": m.observed_at.isoformat() if m.observed_at else None,
        "revision": m.revision, "score": round(b.total, 6),
        "score_breakdown": b.as_dict(), "matched_by": sorted(s.sources),
    }


def build_bundle(
    session: Session, principal: PrincipalContext, request: RecallRequest, now: datetime,
    clock: StageClock | None = None,
) -> Outcome:
    plan, filters = request.plan, request.filters
    clock = clock or StageClock()
    revision = snapshot_revision(session)
    warnings: list[str] = []
    decisions: list[dict[str, Any]] = []
    conflicts: list[dict[str, Any]] = []
    not_applicable: list[dict[str, Any]] = []
    filtered: dict[str, int] = {}
    explained: list[dict[str, Any]] = []
    selected: list[Scored] = []
    knowledge: list[Scored] = []
    truncated = False
    considered = dropped = 0

    prefs = effective_preferences([], request.request_constraints)
    if plan.reads(SourceType.USER_PROFILE):
        spec = plan.reads(SourceType.USER_PROFILE)
        assert spec is not None
        prefs = effective_preferences(
            stored_preferences(session, principal, filters, now, spec.limit), request.request_constraints
        )
    decisions += prefs.decisions
    conflicts += prefs.conflicts
    clock.end(Stage.PLAN)

    task = dict(request.task_state) if request.task_state else None
    if task and task.get("status") == "WAITING_FOR_APPROVAL":
        warnings.append("the task is waiting for approval: do not publish or act on its draft yet")

    if plan.reads(SourceType.MEMORY):
        if not tokens(request.query):
            raise InvalidInput("the query has no searchable words or characters", code="empty_query")
        if request.retrieval not in ("hybrid", "lexical", "semantic"):
            raise InvalidInput(f"unknown retrieval mode {request.retrieval!r}", code="invalid_retrieval")
        lexical_on, semantic_on = request.retrieval != "semantic", request.retrieval != "lexical"
        terms = cand.search_terms(request.query) if lexical_on else []
        cap = plan.candidate_limit
        with cand.index_first(session, cap):
            fulltext = cand.fulltext_candidates(session, principal, filters, terms, now, cap)
            # Near-spellings are for words that matched too little; a full cap of exact matches needs none.
            near_spellings = lexical_on and len(fulltext) < cap
            # A caller who sees few of a large tenant's memories: trigram and vector compare theirs directly.
            few = cand.sees_few(session, principal) if near_spellings or (semantic_on and request.model) else None
            lexical = [
                cand.key_candidates(session, principal, filters, request.keys, now, cap) if lexical_on else [],
                fulltext,
                cand.trigram_candidates(session, principal, filters, request.query, now, cap, bool(few))
                if near_spellings else [],
            ]
            # The vector is awaited only now: an embedding still being computed overlapped the lexical sources.
            embedding, vector_warnings = vector_or_warning(request) if semantic_on else (None, [])
            warnings += vector_warnings
            query_vector = cand.vector_text(embedding) if embedding is not None else None
            if query_vector is not None and request.model is not None and other_model_vectors(
                    session, principal.tenant_id, request.model):
                warnings.append(REEMBEDDING)
            found = cand.merge(
                *lexical,
                cand.vector_candidates(session, principal, filters, query_vector, request.model, now, cap, few)
                if query_vector is not None and request.model is not None else [],
            )
            # Still index-first: one primary-key lookup per candidate in each joined table (with the
            # defaults, the planner re-scanned the whole usage table for every candidate).
            current = reread(session, principal, filters, found, query_vector, request.model, now)
        considered, dropped = len(found), len(found) - len(current)
        clock.end(Stage.CANDIDATES)
        pool = [
            Evidence(row.memory, frozenset(c.sources), c.fulltext, c.trigram, row.cosine, row.active_count,
                     row.last_used_at)
            for c in found
            # A candidate changed or removed since its source query is dropped: the source row is the truth.
            if (row := current.get((c.memory_id, c.version))) is not None
        ]
        scored = score_pool(pool, terms, now)
        ranked, rerank_warnings = rerank(request.reranker, request.query, stable_rank(scored))
        warnings += rerank_warnings
        if request.explain:
            filtered = filtered_by_reason(session, principal, filters, cand.lexical_match(request.query, terms),
                                          literal(now))
            explained = [{"rank": n + 1, "memory_id": str(s.memory.memory_id), "version": s.memory.version,
                          "matched_by": sorted(s.sources), "breakdown": s.breakdown.as_dict()}
                         for n, s in enumerate(ranked)]
        relevant = []
        for s in ranked:
            if s.memory.key in request.request_constraints or any(s.memory is u for u in prefs.used):
                continue  # represented in effective_preferences (or overridden for this request)
            reason = _not_applicable(s, request)
            if reason is not None:
                not_applicable.append({"memory_id": str(s.memory.memory_id), "version": s.memory.version,
                                       "reason": reason})
                continue
            relevant.append(s)
        if task:
            stale = stale_against_task(relevant, str(task["task_id"]), int(task["state_version"]), str(task["status"]))
            relevant, decisions, warnings = stale.kept, decisions + stale.decisions, warnings + stale.warnings
        resolution = resolve(relevant)
        decisions += resolution.decisions
        conflicts += resolution.conflicts
        warnings += resolution.warnings
        kept, dup = _dedupe_by_source(resolution.kept)
        clock.end(Stage.RANKING)
        decisions += dup
        used_tokens = 0
        for s in kept:
            if len(selected) + len(knowledge) >= plan.inject_limit:
                break
            cost = count_tokens(s.memory.content)
            if used_tokens + cost > plan.token_budget:
                truncated = True
                continue
            used_tokens += cost
            (knowledge if s.memory.space in (Space.TENANT.value, Space.SYSTEM.value) else selected).append(s)
        not_applicable = not_applicable[:20]

    version_vector: dict[str, int] = {f"memory:{s.memory.memory_id}": s.memory.version for s in (*knowledge, *selected)}
    for memory in prefs.used:
        version_vector[f"preference:{memory.memory_id}"] = memory.version
    if task:
        version_vector["task_state_version"] = int(task["state_version"])
    bundle: dict[str, Any] = {
        "trace_id": request.trace_id,
        "intent": plan.intent.value,
        "plan": {"sources": [{"type": s.type.value, "limit": s.limit, "required": s.required} for s in plan.sources],
                 "candidate_limit": plan.candidate_limit, "inject_limit": plan.inject_limit,
                 "token_budget": plan.token_budget},
        "request_constraints": [{"key": k, "value": v, "source": "CURRENT_REQUEST"}
                                for k, v in sorted(request.request_constraints.items())],
        "effective_preferences": prefs.effective,
        "preference_sources": prefs.sources,
        "task_state": task,
        "knowledge": [item_of(s) for s in knowledge],
        "items": [item_of(s) for s in selected],
        "conflict_decisions": decisions,
        "conflicts": conflicts,
        "warnings": warnings,
        "version_vector": version_vector,
        "snapshot_revision": revision,
        "truncated_by_budget": truncated,
        "not_applicable": not_applicable,
        "candidates_considered": considered,
        "dropped_on_reread": dropped,
    }
    if request.explain:
        bundle["explain"] = {"candidates": explained, "filtered_by_reason": filtered}
    clock.end(Stage.ASSEMBLE)
    return Outcome(bundle, filtered, [*knowledge, *selected])


def mark_used(session: Session, tenant_id: str, selected: list[Scored], now: datetime) -> None:
    """Hotness input: each injected memory's use count and last use (``memory_usage``, purged with the projection).

    Only for memories whose projection row still exists, in memory-id order (one lock order for
    concurrent bundles). The projection rows are read ``FOR KEY SHARE``: a purge deleting one of them
    concurrently either waits for this transaction (and its cascade then removes the new counter) or
    commits first, and the locked read skips the row. Either way no counter outlives its memory, and
    the foreign key never fails mid-bundle.
    """
    mark_used_ids(session, tenant_id, [s.memory.memory_id for s in selected], now)


def mark_used_ids(session: Session, tenant_id: str, memory_ids: Sequence[uuid.UUID], now: datetime) -> None:
    """:func:`mark_used` by id: a session commit counts the memories its bundles and profile injection used."""
    ids = list(set(memory_ids))  # the statement orders them
    if not ids:
        return
    # On the session's connection: ORM execution would take the parameters for rows to insert.
    session.connection().execute(_mark_used_statement(), {"tenant": tenant_id, "ids": ids, "now": now})


@lru_cache(maxsize=1)
def _mark_used_statement() -> Insert:
    """Built once (building it cost ~1 ms a bundle); the tenant, the ids and the instant are parameters."""
    present = (
        select(MemorySearch.tenant_id, MemorySearch.memory_id, literal(1),
               bindparam("now", type_=DateTime(timezone=True)))
        .where(MemorySearch.tenant_id == bindparam("tenant", type_=Text),
               MemorySearch.memory_id == any_(bindparam("ids", type_=ARRAY(UUID(as_uuid=True)))))
        .order_by(MemorySearch.memory_id)
        .with_for_update(read=True, key_share=True)
    )
    statement = insert(MemoryUsage).from_select(["tenant_id", "memory_id", "active_count", "last_used_at"], present)
    return statement.on_conflict_do_update(
        index_elements=["tenant_id", "memory_id"],
        set_={"active_count": MemoryUsage.active_count + 1, "last_used_at": statement.excluded.last_used_at},
    )
