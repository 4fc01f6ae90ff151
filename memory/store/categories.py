"""The category overview (seed 004 §9.3, L0): per category, how many memories the caller may use now and a
one-line abstract of them, so an agent knows where to search before it searches.

It counts exactly what recall may use (:func:`memory.store.visibility.hard_filters`: the caller's scope, ACTIVE,
inside the validity window, not deleted), so the overview never announces a memory recall would not return.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memory.enums import Category
from memory.identity.auth import PrincipalContext
from memory.models import Memory
from memory.store.visibility import QueryFilters, hard_filters

ABSTRACTS_PER_CATEGORY = 3
ABSTRACT_CHARS = 160


@dataclass(frozen=True)
class CategoryOverview:
    category: Category
    count: int
    abstract: str
    """The newest abstracts joined with "; ", cut to :data:`ABSTRACT_CHARS`; "" for an empty category."""


def category_overview(session: Session, principal: PrincipalContext) -> list[CategoryOverview]:
    """Every category, in the enum's order, empty ones included (an agent learns what is absent too)."""
    usable = hard_filters(principal, QueryFilters(), func.now())
    counts = dict(session.execute(select(Memory.category, func.count()).where(usable).group_by(Memory.category)).all())
    newest = (
        select(Memory.category, Memory.abstract,
               func.row_number().over(partition_by=Memory.category,
                                      order_by=(Memory.stored_at.desc(), Memory.memory_id)).label("rank"))
        .where(usable)
        .subquery()
    )
    abstracts: dict[str, list[str]] = {}
    rows = session.execute(
        select(newest.c.category, newest.c.abstract).where(newest.c.rank <= ABSTRACTS_PER_CATEGORY)
        .order_by(newest.c.category, newest.c.rank)
    )
    for category, abstract in rows:
        abstracts.setdefault(category, []).append(" ".join(abstract.split()))
    return [
        CategoryOverview(category, counts.get(category.value, 0), _one_line(abstracts.get(category.value, [])))
        for category in Category
    ]


def _one_line(abstracts: list[str]) -> str:
    line = "; ".join(abstracts)
    return line if len(line) <= ABSTRACT_CHARS else line[: ABSTRACT_CHARS - 1] + "…"
