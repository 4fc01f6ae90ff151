"""Lexical memory query: hard filters, then full-text and trigram candidates, then a re-read.

Hard filters run inside the candidate query itself, so nothing the caller may
not see is ever scored. Candidates are then re-read from the source table and
checked again (status, version, validity), because a projection row is only a
pointer: the source row is the truth. The full recall pipeline (vectors,
conflicts, bundles) builds on these stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from sqlalchemy import ColumnElement, and_, func, literal, or_, select, text, tuple_
from sqlalchemy.orm import Session

from memory.auth import PrincipalContext
from memory.enums import Category, Space, Status
from memory.errors import InvalidInput
from memory.memories import not_tombstoned, visible_to
from memory.models import Memory, MemorySearch
from memory.text import lexemes, normalize, tsquery_any

DEFAULT_CANDIDATES = 20
DEFAULT_LIMIT = 5


@dataclass(frozen=True)
class QueryFilters:
    categories: tuple[Category, ...] = ()
    spaces: tuple[Space, ...] = ()
    project_id: str | None = None
    session_id: str | None = None
    purpose: str | None = None


@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float
    lexical: float
    trigram: float


@dataclass(frozen=True)
class QueryResult:
    hits: list[Hit]
    candidates: int
    dropped_on_reread: int
    snapshot_revision: int
    filters: QueryFilters = field(default_factory=QueryFilters)


def hard_filters(principal: PrincipalContext, filters: QueryFilters, now: ColumnElement[datetime]) -> ColumnElement[bool]:
    """Scope, status, validity window, expiry and purpose: what may be used at all, right now."""
    return and_(
        _standing_filters(principal, filters),
        or_(Memory.effective_from.is_(None), Memory.effective_from <= now),
        or_(Memory.effective_to.is_(None), Memory.effective_to > now),
        or_(Memory.expires_at.is_(None), Memory.expires_at > now),
    )


@lru_cache(maxsize=1024)
def _standing_filters(principal: PrincipalContext, filters: QueryFilters) -> ColumnElement[bool]:
    """The filters that do not depend on the instant, built once per caller and filter set.

    A recall carries them in five statements; building the expression tree (the tombstone
    subquery above all) cost ~3 ms each time. SQLAlchemy expressions are immutable, so one
    tree serves every statement that embeds it.
    """
    clauses: list[ColumnElement[bool]] = [
        visible_to(principal),
        Memory.status == Status.ACTIVE.value,
        not_tombstoned(),
        # A purpose-restricted memory is used only for a request that states one of its purposes.
        or_(
            func.cardinality(Memory.allowed_purposes) == 0,
            literal(filters.purpose).op("=")(func.any(Memory.allowed_purposes))
            if filters.purpose
            else literal(False),
        ),
    ]
    if filters.categories:
        clauses.append(Memory.category.in_([c.value for c in filters.categories]))
    if filters.spaces:
        clauses.append(Memory.space.in_([s.value for s in filters.spaces]))
    if filters.project_id is not None:
        clauses.append(or_(Memory.project_id.is_(None), Memory.project_id == filters.project_id))
    if filters.session_id is not None:
        clauses.append(or_(Memory.space != Space.SESSION.value, Memory.session_id == filters.session_id))
    else:
        clauses.append(Memory.space != Space.SESSION.value)
    return and_(*clauses)


def lexical_query(
    session: Session,
    principal: PrincipalContext,
    query: str,
    filters: QueryFilters,
    *,
    limit: int = DEFAULT_LIMIT,
    candidate_limit: int = DEFAULT_CANDIDATES,
) -> QueryResult:
    query_tokens = lexemes(query)
    if not query_tokens:
        raise InvalidInput("the query has no searchable words or characters", code="empty_query")
    now = func.now()
    revision = int(session.execute(text("SELECT last_value FROM mnemo_revision_seq")).scalar_one())
    tsquery = func.to_tsquery("simple", tsquery_any(query_tokens))
    normalized = normalize(query)
    lexical = func.ts_rank(MemorySearch.tokens, tsquery, 32)
    trigram = func.word_similarity(normalized, MemorySearch.search_text)
    score = (lexical + trigram).label("score")
    candidates = session.execute(
        select(Memory.memory_id, Memory.version, lexical.label("lexical"), trigram.label("trigram"), score)
        .join(
            MemorySearch,
            and_(
                MemorySearch.tenant_id == Memory.tenant_id,
                MemorySearch.memory_id == Memory.memory_id,
                MemorySearch.version == Memory.version,
            ),
        )
        .where(
            MemorySearch.tenant_id == principal.tenant_id,
            hard_filters(principal, filters, now),
            or_(MemorySearch.tokens.op("@@")(tsquery), literal(normalized).op("<%")(MemorySearch.search_text)),
        )
        .order_by(score.desc(), Memory.revision.desc(), Memory.memory_id)
        .limit(candidate_limit)
    ).all()
    if not candidates:
        return QueryResult([], 0, 0, revision, filters)
    # Authoritative re-read: the source rows, checked again against every hard filter.
    keys = [(row.memory_id, row.version) for row in candidates]
    current = {
        (m.memory_id, m.version): m
        for m in session.execute(
            select(Memory).where(
                Memory.tenant_id == principal.tenant_id,
                tuple_(Memory.memory_id, Memory.version).in_(keys),
                hard_filters(principal, filters, now),
            )
        ).scalars()
    }
    hits = [
        Hit(current[(row.memory_id, row.version)], float(row.score), float(row.lexical), float(row.trigram))
        for row in candidates
        if (row.memory_id, row.version) in current
    ]
    return QueryResult(hits[:limit], len(candidates), len(candidates) - len(current), revision, filters)
