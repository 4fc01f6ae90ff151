"""Candidate sources: exact key, full text, trigram and vector, each capped, each inside the hard filters.

Every source query joins the current projection row to its memory version and
carries :func:`memory.query.hard_filters`, so a row the caller may not use is
never returned, whatever its similarity. A vector is used only while it was
computed from the memory's current revision (the projection carries the source
revision; recall re-validates it against the source row here).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Subquery, and_, func, literal, or_, select, text
from sqlalchemy.orm import Session

from memory.auth import PrincipalContext
from memory.models import Memory, MemorySearch
from memory.query import QueryFilters, hard_filters
from memory.text import normalize, tokens, tsquery_any

STOPWORDS = frozenset(
    """a an the and or but if of at by for with about against between into through during before after above below
    to from up down in out on off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will just don should now i me my
    myself we our ours you your yours he him his she her hers it its they them their what which who whom this that
    these those am is are was were be been being have has had having do does did doing would could ever""".split()
)
"""English function words carry no topic; dropping them keeps full-text candidates about the question."""


def search_terms(query: str) -> list[str]:
    """Unique query tokens in order, without stop words (all of them when the query is only stop words)."""
    unique = list(dict.fromkeys(tokens(query)))
    informative = [term for term in unique if term not in STOPWORDS]
    return informative or unique


@dataclass
class Candidate:
    memory_id: uuid.UUID
    version: int
    sources: set[str] = field(default_factory=set)
    fulltext: float = 0.0
    trigram: float = 0.0
    semantic: float | None = None
    active_count: int = 0
    last_used_at: datetime | None = None


def _joined(principal: PrincipalContext, filters: QueryFilters, now: ColumnElement[datetime]) -> tuple:  # type: ignore[type-arg]
    on = and_(
        MemorySearch.tenant_id == Memory.tenant_id,
        MemorySearch.memory_id == Memory.memory_id,
        MemorySearch.version == Memory.version,
    )
    return on, (MemorySearch.tenant_id == principal.tenant_id, hard_filters(principal, filters, now))


def _select(*columns: object):  # type: ignore[no-untyped-def]
    return select(Memory.memory_id, Memory.version, MemorySearch.active_count, MemorySearch.last_used_at, *columns)


def key_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, keys: Sequence[str],
    now: ColumnElement[datetime], limit: int,
) -> list[Candidate]:
    """Memories whose fact key is one of ``keys``: a named attribute is found whatever the wording."""
    if not keys:
        return []
    on, where = _joined(principal, filters, now)
    rows = session.execute(
        _select().join(MemorySearch, on).where(*where, Memory.key.in_(list(keys)))
        .order_by(Memory.revision.desc(), Memory.memory_id).limit(limit)
    ).all()
    return [Candidate(r.memory_id, r.version, {"key"}, active_count=r.active_count, last_used_at=r.last_used_at) for r in rows]


def _index_first(
    session: Session, principal: PrincipalContext, filters: QueryFilters, now: ColumnElement[datetime],
    hits: Subquery, score: str, limit: int,
) -> list[Any]:
    """Join index hits to their memory versions under the hard filters; keep the best ``limit``.

    ``hits`` is a fenced subquery (``OFFSET 0``) over ``memory_search`` alone, so the planner
    starts from the GIN index and reads only matching rows, instead of testing the match on
    every memory the caller may see. The hard filters are the same and run in the same statement.
    """
    ranked = hits.c[score]
    return list(
        session.execute(
            select(Memory.memory_id, Memory.version, hits.c.active_count, hits.c.last_used_at, ranked)
            .select_from(hits)
            .join(
                Memory,
                and_(
                    Memory.tenant_id == principal.tenant_id,
                    Memory.memory_id == hits.c.memory_id,
                    Memory.version == hits.c.version,
                ),
            )
            .where(hard_filters(principal, filters, now))
            .order_by(ranked.desc(), Memory.revision.desc(), Memory.memory_id)
            .limit(limit)
        ).all()
    )


def _hits(principal: PrincipalContext, match: ColumnElement[bool], score: ColumnElement[float], name: str) -> Subquery:
    return (
        select(
            MemorySearch.memory_id,
            MemorySearch.version,
            MemorySearch.active_count,
            MemorySearch.last_used_at,
            score.label(name),
        )
        .where(MemorySearch.tenant_id == principal.tenant_id, match)
        .offset(0)
        .subquery(f"{name}_hits")
    )


def fulltext_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, terms: list[str],
    now: ColumnElement[datetime], limit: int,
) -> list[Candidate]:
    """Any informative query term, ranked by ``ts_rank`` (normalised to [0, 1) with rank/(rank+1))."""
    if not terms:
        return []
    tsquery = func.to_tsquery("simple", tsquery_any(terms))
    hits = _hits(principal, MemorySearch.tokens.op("@@")(tsquery), func.ts_rank(MemorySearch.tokens, tsquery, 32), "rank")
    return [
        Candidate(r.memory_id, r.version, {"fulltext"}, fulltext=float(r.rank), active_count=r.active_count,
                  last_used_at=r.last_used_at)
        for r in _index_first(session, principal, filters, now, hits, "rank", limit)
    ]


TRIGRAM_MAX_QUERY_CHARS = 32


def trigram_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, query: str,
    now: ColumnElement[datetime], limit: int,
) -> list[Candidate]:
    """Near-spellings (typos, partial words) through the trigram index: ``word_similarity`` above pg_trgm's threshold.

    Only for short queries (a key, a name, a term): a sentence has so many trigrams that the
    index matches most rows, and full text and vectors already cover sentences.
    """
    normalized = normalize(query)
    if len(normalized) > TRIGRAM_MAX_QUERY_CHARS:
        return []
    hits = _hits(
        principal,
        literal(normalized).op("<%")(MemorySearch.search_text),
        func.word_similarity(normalized, MemorySearch.search_text),
        "similarity",
    )
    return [
        Candidate(r.memory_id, r.version, {"trigram"}, trigram=float(r.similarity), active_count=r.active_count,
                  last_used_at=r.last_used_at)
        for r in _index_first(session, principal, filters, now, hits, "similarity", limit)
    ]


def vector_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, query_vector: list[float], model: str,
    now: ColumnElement[datetime], limit: int,
) -> list[Candidate]:
    """Nearest vectors by cosine, from the current model and computed from the current revision only.

    The hard filters are part of this query, never applied to a top-k afterwards: what the caller
    may not see must not even take a neighbour's place. Iterative scan lets the HNSW index keep
    walking the graph while rows fail the filters (pgvector >= 0.8), when the planner drives the
    join from it.
    """
    session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
    on, where = _joined(principal, filters, now)
    distance = MemorySearch.embedding.cosine_distance(query_vector).label("distance")
    rows = session.execute(
        _select(distance).join(MemorySearch, on)
        .where(
            *where,
            MemorySearch.embedding.is_not(None),
            MemorySearch.embedding_model == model,
            MemorySearch.embedding_revision == Memory.revision,
        )
        .order_by(distance, Memory.memory_id).limit(limit)
    ).all()
    return [
        Candidate(r.memory_id, r.version, {"vector"}, semantic=1.0 - float(r.distance), active_count=r.active_count,
                  last_used_at=r.last_used_at)
        for r in rows
    ]


def merge(*lists: list[Candidate]) -> list[Candidate]:
    """One candidate per (memory, version), keeping each source's evidence; order by id (ranking comes later)."""
    merged: dict[tuple[uuid.UUID, int], Candidate] = {}
    for candidates in lists:
        for c in candidates:
            key = (c.memory_id, c.version)
            into = merged.setdefault(key, Candidate(c.memory_id, c.version, active_count=c.active_count,
                                                    last_used_at=c.last_used_at))
            into.sources |= c.sources
            into.fulltext = max(into.fulltext, c.fulltext)
            into.trigram = max(into.trigram, c.trigram)
            if c.semantic is not None:
                into.semantic = c.semantic if into.semantic is None else max(into.semantic, c.semantic)
    return [merged[key] for key in sorted(merged, key=lambda k: (str(k[0]), k[1]))]


def lexical_match(query: str, terms: list[str]) -> ColumnElement[bool]:
    """The lexical match condition alone (for counting what the hard filters removed)."""
    clauses = [literal(normalize(query)).op("<%")(MemorySearch.search_text)]
    if terms:
        clauses.append(MemorySearch.tokens.op("@@")(func.to_tsquery("simple", tsquery_any(terms))))
    return or_(*clauses)
