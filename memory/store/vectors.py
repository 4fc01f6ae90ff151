"""The vector backlog: which memories still need a vector from a model, and writing the vectors back.

Vectors are filled after the write transaction (by a Temporal activity) and
carry the source revision they were computed from. :func:`store_vectors` writes
a vector only if that revision is still the current, non-deleted head, so a
vector computed from a superseded or deleted version is refused, never stored.
A text that crashes the engine is marked (:func:`mark_unembeddable`) instead of
being retried forever; a new version of it, or a new model, tries again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select, update
from sqlalchemy.orm import Session

from memory.db import affected_rows
from memory.enums import Status
from memory.models import Memory, MemorySearch
from memory.store.memory_text import embedding_text
from memory.store.visibility import not_tombstoned

log = logging.getLogger(__name__)

UNEMBEDDABLE = "unembeddable:"
"""Prefix of ``embedding_model`` on a projection row (without a vector) whose text crashed ``model``."""


@dataclass(frozen=True)
class PendingVector:
    memory_id: uuid.UUID
    version: int
    revision: int
    text: str


def _current_head() -> Any:
    return and_(
        Memory.tenant_id == MemorySearch.tenant_id,
        Memory.memory_id == MemorySearch.memory_id,
        Memory.version == MemorySearch.version,
        Memory.status.in_([Status.ACTIVE.value, Status.CANDIDATE.value]),
        not_tombstoned(),
    )


def _backlog_parts(model: str) -> tuple[tuple[tuple[ColumnElement[bool], ...], tuple[Any, ...]], ...]:
    """The backlog of ``model`` in three parts, each (condition, order) matching its index: no vector (not
    crashed on ``model``; ``memory_search_unembedded``), and a vector of a model sorting below, then above it
    (migration 0007's ``memory_search_embedding_model``, as two ranges)."""
    stored = MemorySearch.embedding.is_not(None)
    return (
        (
            (MemorySearch.embedding.is_(None), MemorySearch.embedding_model.is_distinct_from(unembeddable(model))),
            (MemorySearch.memory_id,),
        ),
        ((stored, MemorySearch.embedding_model < model), (MemorySearch.embedding_model, MemorySearch.memory_id)),
        ((stored, MemorySearch.embedding_model > model), (MemorySearch.embedding_model, MemorySearch.memory_id)),
    )


def pending_batch(session: Session, tenant_id: str, model: str, limit: int) -> list[PendingVector]:
    """Current heads without a vector from ``model``: new writes first (by id), then vectors of other models.

    A head whose text crashed ``model`` (:func:`mark_unembeddable`) is not pending.

    Each part is read through its own index (:func:`_backlog_parts`), so an empty backlog costs three index
    probes instead of a pass over the tenant's rows.
    """
    found: list[Memory] = []
    for condition, order in _backlog_parts(model):
        if len(found) >= limit:
            break
        found += session.execute(
            select(Memory)
            .join(MemorySearch, _current_head())
            .where(MemorySearch.tenant_id == tenant_id, *condition)
            .order_by(*order)
            .limit(limit - len(found))
        ).scalars()
    return [PendingVector(m.memory_id, m.version, m.revision, embedding_text(m)) for m in found]


def has_backlog(tenant_id: ColumnElement[str], model: str) -> ColumnElement[bool]:
    """``tenant_id`` (a column, for a listing over tenants) has a head :func:`pending_batch` would return: the
    same parts, each an index probe (``EXISTS``), so the embedding sweep visits only tenants with work."""
    return or_(*(
        select(Memory.memory_id).join(MemorySearch, _current_head())
        .where(MemorySearch.tenant_id == tenant_id, *condition).exists()
        for condition, _ in _backlog_parts(model)
    ))


def _write_if_current(session: Session, tenant_id: str, item: PendingVector, values: dict[str, Any]) -> bool:
    """Update ``item``'s projection row only if its memory is still that current, non-deleted revision."""
    still_current = (
        select(Memory.memory_id)
        .where(
            Memory.tenant_id == tenant_id,
            Memory.memory_id == item.memory_id,
            Memory.version == item.version,
            Memory.revision == item.revision,
            Memory.status.in_([Status.ACTIVE.value, Status.CANDIDATE.value]),
            Memory.purged_at.is_(None),
            not_tombstoned(),
        )
        .exists()
    )
    result = session.execute(
        update(MemorySearch)
        .where(
            MemorySearch.tenant_id == tenant_id,
            MemorySearch.memory_id == item.memory_id,
            MemorySearch.version == item.version,
            still_current,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return bool(affected_rows(result))


def store_vectors(
    session: Session, tenant_id: str, model: str, items: Sequence[tuple[PendingVector, list[float]]]
) -> tuple[int, int]:
    """Write each vector only if its memory is still the same current, non-deleted revision.

    Returns (written, refused). A refused vector was computed from text that is no
    longer the truth (superseded, expired, deleted, tombstoned); the new version, if
    any, is picked up by the next batch.
    """
    written = sum(
        _write_if_current(
            session,
            tenant_id,
            item,
            {"embedding": vector, "embedding_model": model, "embedding_revision": item.revision},
        )
        for item, vector in items
    )
    return written, len(items) - written


def unembeddable(model: str) -> str:
    """The ``embedding_model`` of a row whose text crashed ``model`` (and so has no vector)."""
    return UNEMBEDDABLE + model


def mark_unembeddable(session: Session, tenant_id: str, model: str, item: PendingVector) -> bool:
    """Take a text that crashed the engine out of the backlog, so it does not crash it again and again.

    The row keeps no vector (recall finds the memory lexically); a correction (a new version or
    revision) or another model puts it back in the backlog.
    """
    marked = _write_if_current(
        session, tenant_id, item, {"embedding_model": unembeddable(model), "embedding_revision": item.revision}
    )
    if marked:
        log.error("memory %s v%d crashed the embedding engine: it stays without a vector", item.memory_id, item.version)
    return marked
