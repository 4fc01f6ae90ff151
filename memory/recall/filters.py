"""Hard filters and the explain counts of what they removed.

The filters themselves are :func:`memory.store.visibility.hard_filters` (visibility, ACTIVE,
the deletion barrier, validity window, expiry, purpose, session/project scope):
every candidate query carries them in its WHERE clause, so nothing that fails
one is ever scored. :func:`filtered_by_reason` only *counts* the caller's own
visible, lexically matching memories that a filter removed, by reason. It never
returns their content, and it never counts another tenant's or user's rows
(visibility is applied first) nor tombstoned ones (deleted data must not even
be countable).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, and_, case, func, literal, select
from sqlalchemy.orm import Session

from memory.enums import Status
from memory.identity.auth import PrincipalContext
from memory.models import Memory, MemorySearch
from memory.store.visibility import (
    QueryFilters,
    hard_filters,
    in_project,
    in_session,
    not_tombstoned,
    purpose_allowed,
    visible_to,
)


def _reason(filters: QueryFilters, now: ColumnElement[datetime]) -> ColumnElement[str]:
    return case(
        (Memory.status != Status.ACTIVE.value, func.lower(Memory.status)),
        (and_(Memory.effective_from.is_not(None), Memory.effective_from > now), literal("not_yet_effective")),
        (and_(Memory.effective_to.is_not(None), Memory.effective_to <= now), literal("no_longer_effective")),
        (and_(Memory.expires_at.is_not(None), Memory.expires_at <= now), literal("expired")),
        (~purpose_allowed(filters), literal("purpose_not_allowed")),
        (~in_session(filters), literal("other_session")),
        (~in_project(filters), literal("other_project")),
        else_=literal("category_or_space"),
    )


def filtered_by_reason(
    session: Session,
    principal: PrincipalContext,
    filters: QueryFilters,
    match: ColumnElement[bool],
    now: ColumnElement[datetime],
) -> dict[str, int]:
    """Counts, by reason, of the caller's visible, undeleted memory versions that ``match`` but fail a hard filter."""
    reason = _reason(filters, now).label("reason")
    rows = session.execute(
        select(reason, func.count())
        .select_from(Memory)
        .join(MemorySearch,
              and_(MemorySearch.tenant_id == Memory.tenant_id, MemorySearch.memory_id == Memory.memory_id))
        .where(
            MemorySearch.tenant_id == principal.tenant_id,
            visible_to(principal),
            not_tombstoned(),
            Memory.status != Status.DELETED.value,
            Memory.purged_at.is_(None),
            match,
            ~hard_filters(principal, filters, now),
        )
        .group_by(reason)
        .order_by(reason)
    ).all()
    return {str(row[0]): int(row[1]) for row in rows}
