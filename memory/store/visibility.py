"""The read rules: which memories a caller may see, and which of those recall may use right now.

- :func:`visible_to` is the wall: the caller's tenant, and in it the shared spaces, their own
  USER and SESSION memories and their agent's AGENT memories. Nothing else is ever read for them:
  no other tenant's and no other user's memory (a read of one is the 404 of a missing one).
- :func:`not_tombstoned` is the deletion barrier: a deleted memory is gone for every read.
- :func:`hard_filters` adds what recall may *use*: ACTIVE only, inside its validity window, not
  expired, for a stated purpose, in the caller's session and project. Every recall statement
  (each candidate source, the re-read, the preferences) carries it in its own WHERE clause, so
  nothing the caller may not see is ever scored.

The caller comes from the credential (:class:`memory.identity.auth.PrincipalContext`); a request's
:class:`QueryFilters` can only narrow what these rules allow.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from sqlalchemy import ColumnElement, DateTime, Text, and_, bindparam, cast, exists, false, func, literal, or_, true

from memory.enums import Category, Space, Status
from memory.identity.auth import PrincipalContext
from memory.models import Memory, Tombstone
from memory.store.audience import SHARED_SPACES


@dataclass(frozen=True)
class QueryFilters:
    """A request's narrowing (categories, spaces, project, session, purpose): never a widening."""

    categories: tuple[Category, ...] = ()
    spaces: tuple[Space, ...] = ()
    project_id: str | None = None
    session_id: str | None = None
    purpose: str | None = None


NOW = bindparam("now", type_=DateTime(timezone=True))
"""The instant a recall statement's validity filters compare with, bound when it runs: a statement
built once (with ``hard_filters(..., NOW)``) serves every request, and SQLAlchemy compiles it once."""


def visible_to(principal: PrincipalContext) -> ColumnElement[bool]:
    """Which memories a principal may see at all, whatever their status: the scope wall."""
    agent_clause: ColumnElement[bool] = (
        and_(Memory.space == Space.AGENT.value, Memory.owner_id == principal.agent_id)
        if principal.agent_id is not None
        else false()
    )
    return and_(
        Memory.tenant_id == principal.tenant_id,
        or_(
            Memory.space.in_(SHARED_SPACES),
            and_(Memory.space.in_([Space.USER.value, Space.SESSION.value]), Memory.owner_id == principal.user_id),
            agent_clause,
        ),
    )


def not_tombstoned() -> ColumnElement[bool]:
    """No tombstone covers the row: the deletion barrier, checked on every read and recall.

    A memory tombstone covers every version forever; a subject or session tombstone covers
    what was written up to its revision (later writes are new data).
    """
    personal = Memory.space.in_([Space.USER.value, Space.SESSION.value])
    return ~exists().where(
        Tombstone.tenant_id == Memory.tenant_id,
        or_(
            and_(Tombstone.target_type == "memory", Tombstone.target_id == cast(Memory.memory_id, Text)),
            and_(
                Tombstone.target_type == "subject",
                Tombstone.target_id == Memory.owner_id,
                Tombstone.revision >= Memory.revision,
                personal,
            ),
            and_(
                Tombstone.target_type == "session",
                Tombstone.target_id == Memory.session_id,
                Tombstone.owner_user_id == Memory.owner_id,
                Tombstone.revision >= Memory.revision,
                personal,
            ),
        ),
    )


def purpose_allowed(filters: QueryFilters) -> ColumnElement[bool]:
    """A purpose-restricted memory is used only for a request that states one of its purposes."""
    return or_(
        func.cardinality(Memory.allowed_purposes) == 0,
        literal(filters.purpose).op("=")(func.any(Memory.allowed_purposes)) if filters.purpose else literal(False),
    )


def in_session(filters: QueryFilters) -> ColumnElement[bool]:
    """A SESSION memory is used only within its own session (and never without one)."""
    if filters.session_id is not None:
        return or_(Memory.space != Space.SESSION.value, Memory.session_id == filters.session_id)
    return Memory.space != Space.SESSION.value


def in_project(filters: QueryFilters) -> ColumnElement[bool]:
    """Within a project: its own memories and those of no project."""
    if filters.project_id is not None:
        return or_(Memory.project_id.is_(None), Memory.project_id == filters.project_id)
    return true()


def hard_filters(
    principal: PrincipalContext, filters: QueryFilters, now: ColumnElement[datetime]
) -> ColumnElement[bool]:
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
        purpose_allowed(filters),
    ]
    if filters.categories:
        clauses.append(Memory.category.in_([c.value for c in filters.categories]))
    if filters.spaces:
        clauses.append(Memory.space.in_([s.value for s in filters.spaces]))
    if filters.project_id is not None:
        clauses.append(in_project(filters))
    clauses.append(in_session(filters))
    return and_(*clauses)
