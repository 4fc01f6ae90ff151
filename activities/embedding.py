"""Embedding activities: fill missing or stale vectors, one tenant batch at a time.

The model runs outside any transaction (it is the slow part); the read and the
guarded write are each one short tenant-scoped transaction, so a retry simply
recomputes what is still pending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from temporalio import activity

from activities.db import shielded_session
from memory.embedders import TextEmbedder, configured_embedder
from memory.embedders.engine import EngineCrashed
from memory.store.vectors import PendingVector, mark_unembeddable, pending_batch, store_vectors


@dataclass(frozen=True)
class EmbedBatchInput:
    tenant_id: str
    batch_size: int = 64


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
        """Embed up to ``batch_size`` heads lacking a current-model vector; refuse stale ones on write."""
        model = self.embedder.name
        with shielded_session(self.engine, request.tenant_id) as session:
            pending = pending_batch(session, request.tenant_id, model, request.batch_size)
        if not pending:
            return EmbedBatchResult(0, 0, 0, model)
        embedded = self._embed_isolating(request.tenant_id, pending)
        with shielded_session(self.engine, request.tenant_id) as session:
            written, refused = store_vectors(session, request.tenant_id, model, embedded)
        return EmbedBatchResult(len(pending), written, refused + len(pending) - len(embedded), model)

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
