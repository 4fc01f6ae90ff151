"""The search projection: derived from memories, written in the same transaction, rebuildable."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.enums import Status
from memory.models import Memory, MemorySearch
from memory.text import lexemes, normalize


def write_projection(session: Session, memory: Memory) -> None:
    """Upsert the lexical projection of ``memory``; the embedding is cleared until re-computed."""
    searchable = " ".join(part for part in (memory.key, memory.abstract, memory.overview, memory.content) if part)
    values: dict[str, Any] = {
        "version": memory.version,
        "search_text": normalize(searchable),
        "tokens": func.to_tsvector("simple", " ".join(lexemes(searchable))),
        "embedding": None,
        "embedding_model": None,
        "embedding_revision": None,
        "source_revision": memory.revision,
    }
    session.execute(
        insert(MemorySearch)
        .values(tenant_id=memory.tenant_id, memory_id=memory.memory_id, **values)
        .on_conflict_do_update(index_elements=["tenant_id", "memory_id"], set_=values)
    )


def rebuild_batch(session: Session, tenant_id: str, after: uuid.UUID | None, batch_size: int) -> list[uuid.UUID]:
    """Re-derive the projection of up to ``batch_size`` current memories after ``after`` (by id)."""
    statement = (
        select(Memory)
        .where(
            Memory.tenant_id == tenant_id,
            Memory.status.notin_([Status.SUPERSEDED.value, Status.DELETED.value]),
        )
        .order_by(Memory.memory_id)
        .limit(batch_size)
    )
    if after is not None:
        statement = statement.where(Memory.memory_id > after)
    rebuilt = list(session.execute(statement).scalars())
    for memory in rebuilt:
        write_projection(session, memory)
    return [memory.memory_id for memory in rebuilt]


def delete_projection(session: Session, tenant_id: str, memory_ids: Iterable[uuid.UUID] | Select[Any]) -> None:
    """Remove what the projection derived from these memories: the search row (tokens, text, vector).

    Their usage counters go with it (``memory_usage`` cascades from the search row).
    """
    ids = memory_ids if isinstance(memory_ids, Select) else list(memory_ids)
    session.execute(delete(MemorySearch).where(MemorySearch.tenant_id == tenant_id, MemorySearch.memory_id.in_(ids)))
