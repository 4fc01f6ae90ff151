"""The authoritative re-read: each candidate's source row again, under every hard filter, with its cosine.

A candidate source may have answered from a row that changed since; the row re-read here is the truth,
and a candidate whose version moved on is dropped by the caller.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, Select, Text, and_, any_, bindparam, case, literal, null, select, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm import Session

from memory.identity.auth import PrincipalContext
from memory.models import Memory, MemorySearch, MemoryUsage
from memory.recall import candidates as cand
from memory.store.visibility import NOW, QueryFilters, hard_filters


def snapshot_revision(session: Session) -> int:
    return int(session.execute(text("SELECT last_value FROM mnemo_revision_seq")).scalar_one())


@dataclass(frozen=True)
class Current:
    """A candidate's source row as re-read, the cosine of its still-valid vector, and its usage."""

    memory: Memory
    cosine: float | None
    active_count: int
    last_used_at: datetime | None


def _finite(cosine: float | None) -> float | None:
    """A vector without direction (all zeros) has no cosine: pgvector answers NaN, which would poison every
    z-score of the pool and is not JSON. It counts as no vector."""
    return float(cosine) if cosine is not None and math.isfinite(cosine) else None


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
    return {(m.memory_id, m.version): Current(m, _finite(c), count or 0, used)
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
