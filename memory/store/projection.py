"""The search projection: derived from memories, written in the same transaction, rebuildable."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Select, delete, select, text
from sqlalchemy.orm import Session

from memory.db import affected_rows
from memory.enums import Status
from memory.models import Memory, MemoryLexeme, MemorySearch
from memory.store.audience import audience
from memory.store.memory_text import lexical_text
from memory.text import lexemes, normalize


def lexical_values(memory: Memory) -> tuple[str, str]:
    """The projection's lexical parts for ``memory`` (:func:`memory.store.memory_text.lexical_text`): the
    normalized search text, and the lexemes the ``tokens`` tsvector is made of (``to_tsvector('simple', …)``)."""
    searchable = lexical_text(memory)
    return normalize(searchable), " ".join(lexemes(searchable))


UPSERT_SEARCH = text("""
    INSERT INTO memory_search (tenant_id, memory_id, version, audience, search_text, tokens, embedding,
                               embedding_model, embedding_revision, source_revision)
    SELECT :tenant_id, p.memory_id, p.version, p.audience, p.search_text, to_tsvector('simple', p.lexemes), NULL,
           NULL, NULL, p.source_revision
    FROM unnest(CAST(:memory_id AS uuid[]), CAST(:version AS integer[]), CAST(:audience AS text[]),
                CAST(:search_text AS text[]), CAST(:lexemes AS text[]), CAST(:source_revision AS bigint[]))
         AS p(memory_id, version, audience, search_text, lexemes, source_revision)
    ON CONFLICT (tenant_id, memory_id) DO UPDATE SET
        version = EXCLUDED.version, audience = EXCLUDED.audience, search_text = EXCLUDED.search_text,
        tokens = EXCLUDED.tokens, embedding = NULL, embedding_model = NULL, embedding_revision = NULL,
        source_revision = EXCLUDED.source_revision
""")
"""One statement for a whole batch: its text never changes with the batch's size (one plan, no per-row SQL)."""

DELETE_POSTINGS = text(
    "DELETE FROM memory_lexemes WHERE tenant_id = :tenant_id AND memory_id = ANY(CAST(:memory_id AS uuid[]))")

INSERT_POSTINGS = text("""
    INSERT INTO memory_lexemes (tenant_id, audience, lexeme, revision, memory_id, version)
    SELECT s.tenant_id, w.audience, unnest(tsvector_to_array(s.tokens)), s.source_revision, s.memory_id, s.version
    FROM memory_search s
    JOIN unnest(CAST(:memory_id AS uuid[]), CAST(:audience AS text[])) AS w(memory_id, audience)
      ON w.memory_id = s.memory_id
    WHERE s.tenant_id = :tenant_id
""")


def write_projection(session: Session, memory: Memory) -> None:
    """Upsert the lexical projection of ``memory`` and its audience; the embedding is cleared until re-computed."""
    write_projections(session, [memory])


def write_projections(session: Session, memories: Sequence[Memory]) -> None:
    """Upsert the lexical projection of each memory and its audience (:func:`memory.store.audience.audience`, on the
    row so the vector walk refuses other audiences' rows before any join), then replace their postings: three
    statements however many memories (of one tenant); the embeddings are cleared until re-computed."""
    if not memories:
        return
    tenant_ids = {memory.tenant_id for memory in memories}
    assert len(tenant_ids) == 1, "a projection is written in one tenant's transaction"
    tenant_id = tenant_ids.pop()
    parts = [lexical_values(memory) for memory in memories]
    ids = [memory.memory_id for memory in memories]
    audiences = {memory.memory_id: audience(memory.space, memory.owner_id, memory.session_id) for memory in memories}
    session.execute(UPSERT_SEARCH, {
        "tenant_id": tenant_id, "memory_id": ids, "version": [memory.version for memory in memories],
        "search_text": [search_text for search_text, _ in parts], "lexemes": [words for _, words in parts],
        "source_revision": [memory.revision for memory in memories], "audience": [audiences[i] for i in ids]})
    _write_postings(session, tenant_id, audiences)


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


def _write_postings(session: Session, tenant_id: str, audiences: dict[uuid.UUID, str]) -> None:
    """Replace the memories' rows in ``memory_lexemes`` with the lexemes of their projection rows' ``tokens``.

    Derived in SQL from the stored ``tokens``, as migration 0009 backfills them, so the postings
    hold exactly what the ``tsvector`` holds; ``audiences`` maps each memory to
    :func:`memory.store.audience.audience` of it.
    """
    ids = list(audiences)
    session.execute(DELETE_POSTINGS, {"tenant_id": tenant_id, "memory_id": ids})
    session.execute(INSERT_POSTINGS, {"tenant_id": tenant_id, "memory_id": ids, "audience": list(audiences.values())})


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
    write_projections(session, rebuilt)
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
