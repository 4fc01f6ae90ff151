"""Hard filters: what a caller may use at all, right now.

Every recall statement (each candidate source, the re-read) carries them in its
own WHERE clause, so nothing the caller may not see is ever scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from sqlalchemy import ColumnElement, DateTime, and_, bindparam, func, literal, or_

from memory.auth import PrincipalContext
from memory.enums import Category, Space, Status
from memory.memories import not_tombstoned, visible_to
from memory.models import Memory


@dataclass(frozen=True)
class QueryFilters:
    categories: tuple[Category, ...] = ()
    spaces: tuple[Space, ...] = ()
    project_id: str | None = None
    session_id: str | None = None
    purpose: str | None = None


NOW = bindparam("now", type_=DateTime(timezone=True))
"""The instant a recall statement's validity filters compare with, bound when it runs: a statement
built once (with ``hard_filters(..., NOW)``) serves every request, and SQLAlchemy compiles it once."""


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
