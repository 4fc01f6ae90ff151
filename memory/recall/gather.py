"""The candidate stage: exact-key, full-text, trigram and vector candidates inside the hard filters, re-read.

Its answer is the pool the scorer sees (:class:`Gathered`): every candidate as its source row is now,
with what the sources and the re-read know of it, and the warnings of an optional source that failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from memory.embedders.engine import EmbeddingUnavailable
from memory.embedders.health import count_failure
from memory.embedders.schema import other_model_vectors
from memory.errors import InvalidInput
from memory.identity.auth import PrincipalContext
from memory.recall import candidates as cand
from memory.recall.request import RecallRequest
from memory.recall.reread import reread
from memory.recall.scoring import Evidence
from memory.text import tokens

REEMBEDDING = ("reembedding_in_progress: some memories still carry vectors of another embedding model; until the "
               "embedding sweep has re-embedded them they are found by the lexical sources only")


@dataclass(frozen=True)
class Gathered:
    """The re-read pool, the words the lexical sources searched, and what the stage counted and warned."""

    pool: list[Evidence]
    terms: list[str]
    considered: int = 0
    """Candidates the sources proposed."""
    dropped: int = 0
    """Of those, the ones changed or removed since (the re-read found no such version)."""
    warnings: list[str] = field(default_factory=list)


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


def check_query(request: RecallRequest) -> None:
    """A query with nothing to search, or an unknown retrieval mode, is the caller's error (400)."""
    if not tokens(request.query):
        raise InvalidInput("the query has no searchable words or characters", code="empty_query")
    if request.retrieval not in ("hybrid", "lexical", "semantic"):
        raise InvalidInput(f"unknown retrieval mode {request.retrieval!r}", code="invalid_retrieval")


def gather(session: Session, principal: PrincipalContext, request: RecallRequest, now: datetime) -> Gathered:
    """Every source the retrieval mode asks for, capped per source, then the authoritative re-read."""
    check_query(request)
    terms = cand.search_terms(request.query) if request.retrieval != "semantic" else []
    with cand.index_first(session, request.plan.candidate_limit):
        lexical, few = _lexical_sources(session, principal, request, terms, now)
        # The vector is awaited only now: an embedding still being computed overlapped the lexical sources.
        vector, query_vector, warnings = _vector_source(session, principal, request, few, now)
        found = cand.merge(*lexical, vector)
        # Still index-first: one primary-key lookup per candidate in each joined table (with the
        # defaults, the planner re-scanned the whole usage table for every candidate).
        current = reread(session, principal, request.filters, found, query_vector, request.model, now)
    pool = [
        Evidence(row.memory, frozenset(c.sources), c.fulltext, c.trigram, row.cosine, row.active_count,
                 row.last_used_at)
        for c in found
        # A candidate changed or removed since its source query is dropped: the source row is the truth.
        if (row := current.get((c.memory_id, c.version))) is not None
    ]
    return Gathered(pool, terms, len(found), len(found) - len(current), warnings)


def _lexical_sources(
    session: Session, principal: PrincipalContext, request: RecallRequest, terms: list[str], now: datetime,
) -> tuple[list[list[cand.Candidate]], bool | None]:
    """Exact-key, full-text and trigram candidates, and whether the caller sees few of the tenant's memories."""
    lexical_on, semantic_on = request.retrieval != "semantic", request.retrieval != "lexical"
    cap, filters = request.plan.candidate_limit, request.filters
    fulltext = cand.fulltext_candidates(session, principal, filters, terms, now, cap)
    # Near-spellings are for words that matched too little; a full cap of exact matches needs none.
    near_spellings = lexical_on and len(fulltext) < cap
    # A caller who sees few of a large tenant's memories: trigram and vector compare theirs directly.
    few = cand.sees_few(session, principal) if near_spellings or (semantic_on and request.model) else None
    return [
        cand.key_candidates(session, principal, filters, request.keys, now, cap) if lexical_on else [],
        fulltext,
        cand.trigram_candidates(session, principal, filters, request.query, now, cap, bool(few))
        if near_spellings else [],
    ], few


def _vector_source(
    session: Session, principal: PrincipalContext, request: RecallRequest, few: bool | None, now: datetime,
) -> tuple[list[cand.Candidate], str | None, list[str]]:
    """The nearest vectors (when the mode and the embedding allow), the query vector's text, and warnings."""
    embedding, warnings = vector_or_warning(request) if request.retrieval != "lexical" else (None, [])
    query_vector = cand.vector_text(embedding) if embedding is not None else None
    if query_vector is None or request.model is None:
        return [], query_vector, warnings
    if other_model_vectors(session, principal.tenant_id, request.model):
        warnings.append(REEMBEDDING)
    cap = request.plan.candidate_limit
    return (cand.vector_candidates(session, principal, request.filters, query_vector, request.model, now, cap, few),
            query_vector, warnings)
