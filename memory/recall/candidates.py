"""Candidate sources: exact key, full text, trigram and vector, each capped, each inside the hard filters.

Every source query joins the current projection row to its memory version and
carries :func:`memory.store.visibility.hard_filters`, so a row the caller may not use is
never returned, whatever its similarity. A vector is used only while it was
computed from the memory's current revision (the projection carries the source
revision; recall re-validates it against the source row here).

Each statement is built once per caller, filter set and limit (:func:`functools.lru_cache`), with
the instant, the query text and the query vector as bound parameters: building and cache-keying
a statement of this size cost ~2 ms a time, several times per bundle.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Numeric,
    Select,
    Text,
    and_,
    any_,
    bindparam,
    cast,
    column,
    func,
    literal,
    or_,
    select,
    table,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, REGCLASS
from sqlalchemy.orm import Session

from memory.embedders.schema import of_dimensions, typed
from memory.enums import Status
from memory.identity.auth import PrincipalContext
from memory.models import Memory, MemoryLexeme, MemorySearch, scoped_search
from memory.store.audience import audiences_of
from memory.store.visibility import NOW, QueryFilters, hard_filters, visible_to
from memory.text import normalize, search_terms, tsquery_any

__all__ = ["search_terms"]  # re-exported: the sources' own query terms

pg_class = table("pg_class", column("oid"), column("reltuples"))
"""The catalog's row estimate per relation (-1 until first analysed: never above a count)."""

@dataclass
class Candidate:
    memory_id: uuid.UUID
    version: int
    sources: set[str] = field(default_factory=set)
    fulltext: float = 0.0
    trigram: float = 0.0
    semantic: float | None = None


def key_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, keys: Sequence[str],
    now: datetime, limit: int,
) -> list[Candidate]:
    """Memories whose fact key is one of ``keys``: a named attribute is found whatever the wording."""
    if not keys:
        return []
    rows = session.execute(_key_statement(principal, filters, limit), {"now": now, "keys": list(keys)}).all()
    return [Candidate(r.memory_id, r.version, {"key"}) for r in rows]


@lru_cache(maxsize=256)
def _key_statement(principal: PrincipalContext, filters: QueryFilters, limit: int) -> Select:  # type: ignore[type-arg]
    search = MemorySearch.__table__
    return (
        select(Memory.memory_id, Memory.version).join(search, _on_head(search))
        .where(search.c.tenant_id == principal.tenant_id, hard_filters(principal, filters, NOW),
               Memory.key == any_(bindparam("keys", type_=ARRAY(Text))))
        .order_by(Memory.revision.desc(), Memory.memory_id).limit(limit)
    )


HNSW_MIN_EF_SEARCH = 40
"""pgvector's default candidate list; raised to the source's cap so one index pass can fill it."""
_INDEX_FIRST = "mnemo.index_first"
INDEX_FIRST_SWITCHES = ("enable_hashjoin", "enable_mergejoin", "enable_material", "enable_seqscan", "enable_sort")


@contextmanager
def index_first(session: Session, limit: int) -> Iterator[None]:
    """Planner settings for the candidate queries and the re-read: start from the index, one primary-key lookup per hit.

    The planner cannot know that an index returns the few rows a query needs first (an HNSW walk
    in distance order, a GIN match of a rare term), so it prefers hashing every visible memory of
    a large tenant, or re-scanning a materialised copy of them for every hit (seen at 10k rows:
    0.5 s), and sorting every distance rather than walking the HNSW graph. With these switches off
    the work stays proportional to the rows returned; a sort the query needs (the exact vector
    scan, the final order) still happens. HNSW walks iteratively, with a candidate list as long as
    ``limit``. Transaction-local, set once for a whole candidate stage (a nested use is a no-op)
    and back to the defaults afterwards.
    """
    if session.info.get(_INDEX_FIRST):
        yield
        return
    ef_search = max(HNSW_MIN_EF_SEARCH, int(limit))
    session.execute(text("; ".join([*(f"SET LOCAL {name} = off" for name in INDEX_FIRST_SWITCHES),
                                    "SET LOCAL hnsw.iterative_scan = relaxed_order",
                                    f"SET LOCAL hnsw.ef_search = {ef_search}"])))
    session.info[_INDEX_FIRST] = True
    try:
        yield
    finally:
        session.info.pop(_INDEX_FIRST, None)
    # Not on an error: the transaction is being abandoned (the settings end with it), and after a
    # database error a reset would only fail and hide the cause.
    session.execute(text("; ".join(f"SET LOCAL {name} TO DEFAULT"
                                   for name in (*INDEX_FIRST_SWITCHES, "hnsw.iterative_scan", "hnsw.ef_search"))))


EXAMINED_PER_CANDIDATE = 20
"""A lexical source examines at most 20 matching rows (after the hard filters) per candidate it returns.

That bounds its cost in a very large tenant. The full-text source splits them over the query's
lexemes (each at least ``limit``, at most :data:`MAX_QUERY_LEXEMES` lexemes): the newest visible
matches of each. A rare term's matches all fit, so an old memory with a name or a rare word is
still found; a term that matches most of the tenant contributes its newest matches only. The
trigram source takes the first matches of its index, in table order."""


MAX_QUERY_LEXEMES = 32
"""Query lexemes the full-text source walks at most (the first ones; a query rarely has more): with the
at-least-``limit`` per term, it bounds the rows examined at 32 x ``limit`` per audience of the caller
(two to four, :func:`memory.store.audience.audiences_of`) whatever the query."""


def _tenants_rows(view: Any, principal: PrincipalContext) -> ColumnElement[bool]:
    """The caller's tenant, as a value in the statement: the view's own filter (the transaction's setting) is
    not one the planner, or a cluster distributed by tenant (memory/distribution.py), can route a subquery by."""
    condition: ColumnElement[bool] = view.c.tenant_id == principal.tenant_id
    return condition


def _on_head(view: Any) -> ColumnElement[bool]:
    """``view``'s row joined to the memory version it projects."""
    return and_(Memory.tenant_id == view.c.tenant_id, Memory.memory_id == view.c.memory_id,
                Memory.version == view.c.version)


def fulltext_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, terms: list[str],
    now: datetime, limit: int,
) -> list[Candidate]:
    """Memories with any of the query's terms, ranked by ``ts_rank`` (normalised to [0, 1) with rank/(rank+1)).

    Each term's postings (``memory_lexemes``, migration 0008) in each audience the caller belongs
    to (:mod:`memory.store.audience`, migration 0009) are walked newest first, joined to their memory
    under the hard filters, until ``per_term`` rows pass; the union is ranked. The
    cost follows the rows examined, not how common a term is in the table (a GIN bitmap reads
    every posting first: ~100 ms for a common term at a million memories) nor in other users'
    memories (their postings are not read), and a row the caller may not use never takes a
    place: the filters run before the per-term limit.
    """
    if not terms:
        return []
    parameters = {"now": now, "lexemes": " ".join(terms), "tsquery": tsquery_any(terms), "limit": limit,
                  "examined": EXAMINED_PER_CANDIDATE * limit, "max_lexemes": MAX_QUERY_LEXEMES,
                  "audiences": audiences_of(principal, filters.session_id)}
    with index_first(session, limit):
        rows = session.execute(_fulltext_statement(principal, filters, limit), parameters).all()
    return [Candidate(r.memory_id, r.version, {"fulltext"}, fulltext=float(r.score)) for r in rows]


@lru_cache(maxsize=256)
def _fulltext_statement(principal: PrincipalContext, filters: QueryFilters, limit: int) -> Select:  # type: ignore[type-arg]
    """Per query lexeme and audience, a lateral walk of its newest visible postings; the union ranked by ``ts_rank``.

    The query's lexemes come from ``to_tsvector('simple', …)`` of its terms, as a projection row's
    ``tokens`` come from its lexemes, so both sides are split the same way.
    """
    postings = MemoryLexeme.__table__
    lexemes = func.to_tsvector("simple", bindparam("lexemes", type_=Text))
    split = select(
        func.unnest(func.tsvector_to_array(lexemes)).label("lexeme")
    ).limit(bindparam("max_lexemes", type_=Integer)).subquery("split")
    # The budget is split over the lexemes PostgreSQL made of the terms (it splits "a_b", Python does not).
    per_term = func.greatest(bindparam("limit", type_=Integer),
                             func.ceil(cast(bindparam("examined", type_=Integer), Numeric) / func.count().over()))
    query_lexemes = select(split.c.lexeme, per_term.label("per_term")).subquery("query_lexemes")
    audiences = select(
        func.unnest(bindparam("audiences", type_=ARRAY(Text))).label("audience")
    ).subquery("audiences")
    newest = (
        select(postings.c.memory_id, postings.c.version, postings.c.revision)
        .join(Memory, _on_head(postings))
        .where(postings.c.tenant_id == principal.tenant_id, postings.c.audience == audiences.c.audience,
               postings.c.lexeme == query_lexemes.c.lexeme, hard_filters(principal, filters, NOW))
        .order_by(postings.c.revision.desc(), postings.c.memory_id.desc())
        .limit(query_lexemes.c.per_term)
        .lateral("newest")
    )
    # Each audience's walk stops at per_term; of what they found together, each term keeps its per_term newest.
    walked = (
        select(query_lexemes.c.per_term, newest.c.memory_id, newest.c.version, newest.c.revision,
               func.row_number().over(partition_by=query_lexemes.c.lexeme,
                                      order_by=(newest.c.revision.desc(), newest.c.memory_id.desc())).label("place"))
        .select_from(query_lexemes).join(audiences, true()).join(newest, true()).subquery("walked")
    )
    found = (
        select(walked.c.memory_id, walked.c.version, walked.c.revision)
        .where(walked.c.place <= walked.c.per_term).distinct().subquery("found")
    )
    search = MemorySearch.__table__
    score = func.ts_rank(search.c.tokens, func.to_tsquery("simple", bindparam("tsquery", type_=Text)), 32)
    return (
        select(found.c.memory_id, found.c.version, score.label("score"))
        .join(search, and_(search.c.tenant_id == principal.tenant_id, search.c.memory_id == found.c.memory_id))
        .order_by(score.desc(), found.c.revision.desc(), found.c.memory_id)
        .limit(limit)
    )


TRIGRAM_MAX_QUERY_CHARS = 32


def trigram_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, query: str,
    now: datetime, limit: int, few: bool = False,
) -> list[Candidate]:
    """Near-spellings (typos, partial words) through the trigram index: ``word_similarity`` above pg_trgm's threshold.

    Only for short queries (a key, a name, a term): a sentence has so many trigrams that the
    index matches most rows, and full text and vectors already cover sentences. The match reads
    ``memory_search_scoped`` (migration 0005), so its GIN index drives the query instead of a
    scan of every memory the caller may see; the hard filters are in the same statement, before
    the :data:`EXAMINED_PER_CANDIDATE` cap and the limit, so a row the caller may not use never
    takes a place. The index is table-wide: a caller who sees few memories (``few``, from
    :func:`sees_few`) has each of them compared instead (~0.15 s at a million memories for a common
    trigram, against a few ms).
    """
    normalized = normalize(query)
    if len(normalized) > TRIGRAM_MAX_QUERY_CHARS:
        return []
    parameters = {"now": now, "query": normalized, "examined": EXAMINED_PER_CANDIDATE * limit}
    with index_first(session, limit):
        rows = session.execute(_trigram_statement(principal, filters, limit, few), parameters).all()
    return [Candidate(r.memory_id, r.version, {"trigram"}, trigram=float(r.score)) for r in rows]


@lru_cache(maxsize=256)
def _trigram_statement(principal: PrincipalContext, filters: QueryFilters, limit: int,
                       few: bool) -> Select:  # type: ignore[type-arg]
    view = scoped_search
    query = bindparam("query", type_=Text)
    score = func.word_similarity(query, view.c.search_text).label("score")
    if few:  # from the caller's memories, each compared
        # ``<%`` against an expression, not the column: the table-wide GIN index cannot serve it.
        examined = (
            select(view.c.memory_id, view.c.version, Memory.revision, score)
            .select_from(Memory).join(view, _on_head(view))
            .where(hard_filters(principal, filters, NOW), query.op("<%")(func.concat(view.c.search_text)))
            .subquery("examined")
        )
    else:  # from the index, the first matches that pass the hard filters
        hits = (
            select(view.c.tenant_id, view.c.memory_id, view.c.version, score)
            .where(_tenants_rows(view, principal), query.op("<%")(view.c.search_text)).offset(0).subquery("hits")
        )
        examined = (
            select(hits.c.memory_id, hits.c.version, Memory.revision, hits.c.score)
            .join(Memory, _on_head(hits))
            .where(hard_filters(principal, filters, NOW))
            .limit(bindparam("examined", type_=Integer))  # EXAMINED_PER_CANDIDATE * limit
            .subquery("examined")
        )
    return (
        select(examined).order_by(examined.c.score.desc(), examined.c.revision.desc(), examined.c.memory_id)
        .limit(limit)
    )


MAX_WALK = 20_000
"""Nearest rows of the tenant the index walk reads at most (pgvector's own ``hnsw.max_scan_tuples``)."""


def vector_text(vector: Sequence[float]) -> str:
    """pgvector's text form of a query vector, made once per bundle (formatting 384 floats costs ~0.5 ms)."""
    return "[" + ",".join(map(str, vector)) + "]"


def dimensions_of(query_vector: str) -> int:
    """The dimension of a vector in the text form of :func:`vector_text`."""
    return query_vector.count(",") + 1


def query_vector_param() -> ColumnElement[Any]:
    """The ``query_vector`` parameter (text of :func:`vector_text`) as a pgvector value."""
    return cast(bindparam("query_vector", type_=Text), MemorySearch.embedding.type)


def vector_candidates(
    session: Session, principal: PrincipalContext, filters: QueryFilters, query_vector: str, model: str,
    now: datetime, limit: int, exact_first: bool | None = None,
) -> list[Candidate]:
    """Nearest vectors by cosine, from the current model and computed from the current revision only.

    ``query_vector`` is the text of :func:`vector_text`. The hard filters are part of this query,
    never applied to a top-k afterwards: what the caller may not see must not even take a
    neighbour's place. The statement is ordered by the distance alone, so the planner can walk the
    HNSW index and join each row to its memory under the hard filters; iterative scan keeps walking
    the graph while rows fail them (pgvector >= 0.8), until ``limit`` rows pass. ``relaxed_order``
    may return those rows slightly out of order, so they are sorted here by exact distance, then
    memory id.

    An index walk gives up after ``hnsw.max_scan_tuples`` rows (a tenant or user with few rows in a
    large shared index); when it returns fewer than ``limit``, the exact scan over the caller's
    visible rows answers instead, so a small tenant never loses neighbours to a large one. A caller
    who may see only a few of a large tenant's memories (:func:`sees_few`; ``exact_first`` if the
    caller already asked, while the query embedding was computing) gets the exact scan at once: the
    walk would read the whole ``hnsw.max_scan_tuples`` first (~0.6 s for a new user of a
    million-memory tenant, against 3 ms).
    """
    with index_first(session, limit):
        exact = sees_few(session, principal) if exact_first is None else exact_first
        rows = _nearest(session, principal, filters, query_vector, model, now, limit, exact=exact)
        if not exact and len(rows) < limit:
            rows = _nearest(session, principal, filters, query_vector, model, now, limit, exact=True)
    rows.sort(key=lambda r: (r.distance, str(r.memory_id)))
    return [Candidate(r.memory_id, r.version, {"vector"}, semantic=1.0 - float(r.distance)) for r in rows]


def _nearest(
    session: Session, principal: PrincipalContext, filters: QueryFilters, query_vector: str, model: str,
    now: datetime, limit: int, *, exact: bool,
) -> list[Any]:
    parameters = {"now": now, "query_vector": query_vector, "model": model, "max_walk": MAX_WALK,
                  "audiences": audiences_of(principal, filters.session_id)}
    statement = _nearest_statement(principal, filters, limit, exact, dimensions_of(query_vector))
    return list(session.execute(statement, parameters).all())


FEW_VISIBLE = 2_000
"""Below this many visible memories the exact scan is cheap: 2,000 distances to compute and sort, a few ms
warm (:func:`sees_few`). Above 1,000, so that a whole 1,000-memory tenant beside large ones is one."""
SPARSE = 20
"""More than this many indexed rows for each row the caller sees: a walk finds one of theirs every 20 rows or
more rarely, and may read up to ``hnsw.max_scan_tuples`` rows to fill its cap."""


def sees_few(session: Session, principal: PrincipalContext) -> bool:
    """Whether the caller sees fewer than :data:`FEW_VISIBLE` memories, and under 1 in :data:`SPARSE` of the rows
    the walk would read: the tenant's, or the whole index's (every tenant shares it).

    The counts stop at their threshold (index-only: the visibility index, the projection's key),
    and the second runs only when the first is small: ~1 ms in-process for a caller who sees many.
    The whole table is the planner's estimate (``pg_class.reltuples``): a small tenant beside a
    large one walked ``hnsw.max_scan_tuples`` rows of the others before its exact scan answered.
    It chooses how the caller's own rows are searched, never which rows are.
    """
    parameters = {"few_visible": FEW_VISIBLE, "sparse": SPARSE}
    return bool(session.execute(_sees_few_statement(principal), parameters).scalar_one())


@lru_cache(maxsize=256)
def _sees_few_statement(principal: PrincipalContext) -> Select:  # type: ignore[type-arg]
    few, sparse = bindparam("few_visible", type_=Integer), bindparam("sparse", type_=Integer)
    visible = (select(literal(1).label("one")).select_from(Memory)
               .where(visible_to(principal), Memory.status == Status.ACTIVE.value)
               .limit(few).subquery("visible"))
    seen = select(func.count().label("rows")).select_from(visible).subquery("seen")
    indexed = (select(literal(1).label("one")).select_from(scoped_search)
               .where(_tenants_rows(scoped_search, principal))
               .limit(seen.c.rows * sparse + 1).subquery("indexed"))
    indexed_rows = select(func.count()).select_from(indexed).scalar_subquery()
    table_rows = select(pg_class.c.reltuples).where(
        pg_class.c.oid == cast(literal(MemorySearch.__tablename__), REGCLASS)).scalar_subquery()
    return select(and_(seen.c.rows < few, or_(indexed_rows > seen.c.rows * sparse,
                                              table_rows > seen.c.rows * sparse)))


@lru_cache(maxsize=256)
def _nearest_statement(principal: PrincipalContext, filters: QueryFilters, limit: int,
                       exact: bool, dimensions: int) -> Select:  # type: ignore[type-arg]
    """The ``limit`` nearest visible rows: by walking the HNSW index, or (``exact``) by computing every distance.

    The index walk is a subquery ordered by distance alone (at most :data:`MAX_WALK` rows, which also
    tells the planner that only the first rows are wanted) that refuses another audience's row on the
    row itself (:mod:`memory.store.audience`, migration 0033), joined row by row to its memory under
    the hard filters, with ``limit`` on the join: rows stream from the index until ``limit`` of
    them pass. When the walk ends first, the caller gets the exact scan (see
    :func:`vector_candidates`), never fewer neighbours; it starts from the caller's visible
    memories and sorts every distance. Vectors are read as ``vector(dimensions)`` of that dimension
    only: the expression and predicate of that dimension's index (:mod:`memory.embedders.schema`).
    """
    view = scoped_search
    distance = typed(view.c.embedding, dimensions).cosine_distance(
        typed(bindparam("query_vector", type_=Text), dimensions))
    if exact:
        distance = distance + literal(0.0)  # not an ordering the HNSW index offers: every distance is computed
    current = and_(_tenants_rows(view, principal), view.c.embedding.is_not(None),
                   view.c.embedding_model == bindparam("model", type_=Text),
                   of_dimensions(view.c.embedding, dimensions))
    columns = (view.c.tenant_id, view.c.memory_id, view.c.version, view.c.embedding_revision,
               distance.label("distance"))
    if exact:
        walk = select(*columns).where(current).subquery("nearest")
    else:
        # Another audience's row is refused on the row the walk reads, before any join (migration 0033; a row
        # the migration has not filled yet is anyone's: the hard filters decide).
        audience = or_(view.c.audience.is_(None), view.c.audience == any_(bindparam("audiences", type_=ARRAY(Text))))
        walk = (select(*columns).where(current, audience).order_by(distance)
                .limit(bindparam("max_walk", type_=Integer)).subquery("nearest"))  # MAX_WALK
    order = (walk.c.distance, walk.c.memory_id) if exact else (walk.c.distance,)
    return (
        select(walk.c.memory_id, walk.c.version, walk.c.distance)
        .join(Memory, _on_head(walk))
        .where(walk.c.embedding_revision == Memory.revision, hard_filters(principal, filters, NOW))
        .order_by(*order).limit(limit)
    )


def merge(*lists: list[Candidate]) -> list[Candidate]:
    """One candidate per (memory, version), keeping each source's evidence; order by id (ranking comes later)."""
    merged: dict[tuple[uuid.UUID, int], Candidate] = {}
    for candidates in lists:
        for c in candidates:
            key = (c.memory_id, c.version)
            into = merged.setdefault(key, Candidate(c.memory_id, c.version))
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
