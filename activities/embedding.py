"""Embedding activities: fill missing or stale vectors, a few tenant batches at a time.

The model runs outside any transaction (it is the slow part); the read and each
batch's guarded write are short tenant-scoped transactions, so a retry simply
recomputes what is still pending. While the engines embed one batch, the previous
batch is written (issue 28, item 2): the engines wait for the database only at an
activity's start and end, once every ``batches`` batches, not at every batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from temporalio import activity

from activities.db import shielded_session
from memory.embedders import TextEmbedder, configured_embedder
from memory.embedders.engine import EngineCrashed
from memory.store.vectors import PendingVector, mark_unembeddable, pending_batch, store_vectors

BUDGET_SECONDS = 30.0
"""An activity starts no new batch after this long; what is left is the next activity's (a slow machine's
eight batches stay far within the activity's timeout)."""


@dataclass(frozen=True)
class EmbedBatchInput:
    tenant_id: str
    batch_size: int = 64
    batches: int = 8
    """Batches of ``batch_size`` read at once and embedded one after the other, each written while the next embeds."""


@dataclass(frozen=True)
class EmbedBatchResult:
    pending: int
    written: int
    refused: int
    model: str


class EmbeddingActivities:
    def __init__(self, engine: Engine, embedder: TextEmbedder | None = None) -> None:
        self.engine = engine
        self._embedder = embedder

    @property
    def embedder(self) -> TextEmbedder:
        """The configured model (``MNEMO_EMBEDDINGS_*``): its id is what the backlog compares stored vectors with."""
        if self._embedder is None:
            self._embedder = configured_embedder()
        return self._embedder

    @activity.defn(name="embed_batch")
    def embed_batch(self, request: EmbedBatchInput) -> EmbedBatchResult:
        """Embed up to ``batches`` × ``batch_size`` heads lacking a current-model vector; refuse stale ones on write."""
        model = self.embedder.name
        with shielded_session(self.engine, request.tenant_id) as session:
            pending = pending_batch(session, request.tenant_id, model, request.batch_size * max(request.batches, 1))
        written = refused = 0
        started = time.monotonic()
        with ThreadPoolExecutor(1, thread_name_prefix="mnemo-vector-write") as writer:
            writing: Future[tuple[int, int]] | None = None
            for at in range(0, len(pending), request.batch_size):
                if at and time.monotonic() - started > BUDGET_SECONDS:
                    break
                batch = pending[at : at + request.batch_size]
                embedded = self._embed_isolating(request.tenant_id, batch)
                refused += len(batch) - len(embedded)
                if writing is not None:
                    written, refused = _add(writing.result(), written, refused)
                writing = writer.submit(self._store, request.tenant_id, model, embedded)
            if writing is not None:
                written, refused = _add(writing.result(), written, refused)
        return EmbedBatchResult(len(pending), written, refused, model)

    def _store(self, tenant_id: str, model: str, embedded: list[tuple[PendingVector, list[float]]]) -> tuple[int, int]:
        with shielded_session(self.engine, tenant_id) as session:
            return store_vectors(session, tenant_id, model, embedded)

    def _embed_isolating(self, tenant_id: str, pending: list[PendingVector]) -> list[tuple[PendingVector, list[float]]]:
        """The batch's vectors; if the engine crashes on it, text by text, marking each text that crashes it.

        Without this, one text that crashes the engine would fail the activity on every retry and
        hold back every vector of every tenant behind it.
        """
        try:
            return list(zip(pending, self.embedder.embed([item.text for item in pending]), strict=True))
        except EngineCrashed:
            if len(pending) == 1:
                self._mark(tenant_id, pending[0])
                return []
        embedded = []
        for item in pending:
            try:
                embedded += [(item, self.embedder.embed([item.text])[0])]
            except EngineCrashed:
                self._mark(tenant_id, item)
        return embedded

    def _mark(self, tenant_id: str, item: PendingVector) -> None:
        with shielded_session(self.engine, tenant_id) as session:
            mark_unembeddable(session, tenant_id, self.embedder.name, item)

    def all(self) -> list[Callable[..., Any]]:
        return [self.embed_batch]


def _add(counts: tuple[int, int], written: int, refused: int) -> tuple[int, int]:
    return written + counts[0], refused + counts[1]
