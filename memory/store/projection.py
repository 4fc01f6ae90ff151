"""The search projection: derived from memories, written in the same transaction, rebuildable."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, Text, delete, func, literal, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.db import affected_rows
from memory.enums import Status
from memory.models import Memory, MemoryLexeme, MemorySearch
from memory.store.audience import audience
from memory.store.memory_text import lexical_text
from memory.text import lexemes, normalize


def lexical_columns(memory: Memory) -> dict[str, Any]:
    """The projection's lexical columns for ``memory`` (:func:`memory.store.memory_text.lexical_text`)."""
    searchable = lexical_text(memory)
    return {"search_text": normalize(searchable), "tokens": func.to_tsvector("simple", " ".join(lexemes(searchable)))}


def write_projection(session: Session, memory: Memory) -> None:
    """Upsert the lexical projection of ``memory`` and its audience; the embedding is cleared until re-computed."""
    audience_key = audience(memory.space, memory.owner_id, memory.session_id)
    values: dict[str, Any] = {
        "version": memory.version,
        "audience": audience_key,
        **lexical_columns(memory),
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
    _write_postings(session, memory.tenant_id, memory.memory_id, audience_key)


def has_vector(session: Session, memory: Memory) -> bool:
    """Does the projection hold a vector computed from this version's current revision? (A write clears it;
    the embedding sweep fills it.)"""
    found = session.execute(
        select(MemorySearch.memory_id).where(
            MemorySearch.tenant_id == memory.tenant_id, MemorySearch.memory_id == memory.memory_id,
            MemorySearch.version == memory.version, MemorySearch.source_revision == memory.revision,
            MemorySearch.embedding.is_not(None),
        )
    ).first()
    return found is not None


def _write_postings(session: Session, tenant_id: str, memory_id: uuid.UUID, audience_key: str) -> None:
    """Replace the memory's rows in ``memory_lexemes`` with the lexemes of its projection row's ``tokens``.

    Derived in SQL from the stored ``tokens``, as migration 0009 backfills them, so the postings
    hold exactly what the ``tsvector`` holds; ``audience_key`` is :func:`memory.store.audience.audience` of the memory.
    """
    session.execute(
        delete(MemoryLexeme).where(MemoryLexeme.tenant_id == tenant_id, MemoryLexeme.memory_id == memory_id)
    )
    search = MemorySearch.__table__
    session.execute(
        insert(MemoryLexeme).from_select(
            ["tenant_id", "audience", "lexeme", "revision", "memory_id", "version"],
            select(
                search.c.tenant_id,
                literal(audience_key, Text),
                func.unnest(func.tsvector_to_array(search.c.tokens)),
                search.c.source_revision,
                search.c.memory_id,
                search.c.version,
            )
            .where(search.c.tenant_id == tenant_id, search.c.memory_id == memory_id),
        )
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


def delete_projection(session: Session, tenant_id: str, memory_ids: Iterable[uuid.UUID] | Select[Any]) -> int:
    """Remove what the projection derived from these memories: the search row (tokens, text, vector), its postings.

    Their usage counters go with the search row (``memory_usage`` cascades from it). The search row
    goes first, in the order :func:`write_projection` takes them: a concurrent write holding the row
    makes this wait until it commits, and the postings it wrote are then visible to the second delete
    (in the other order they would survive it, or the two would deadlock). Returns the postings deleted.
    """
    ids = memory_ids if isinstance(memory_ids, Select) else list(memory_ids)
    session.execute(delete(MemorySearch).where(MemorySearch.tenant_id == tenant_id, MemorySearch.memory_id.in_(ids)))
    postings = session.execute(
        delete(MemoryLexeme).where(MemoryLexeme.tenant_id == tenant_id, MemoryLexeme.memory_id.in_(ids)))
    return affected_rows(postings)
