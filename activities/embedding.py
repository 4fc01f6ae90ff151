"""Embedding activities: fill missing or stale vectors, one tenant batch at a time.

The model runs outside any transaction (it is the slow part); the read and the
guarded write are each one short tenant-scoped transaction, so a retry simply
recomputes what is still pending.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, select
from temporalio import activity

from activities.db import shielded_session
from memory.db import global_session
from memory.embeddings import Embedder, default_embedder, pending_batch, store_vectors
from memory.models import Tenant


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
    def __init__(self, engine: Engine, embedder: Embedder | None = None) -> None:
        self.engine = engine
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    @activity.defn(name="embedding_tenants")
    def tenants(self) -> list[str]:
        with global_session(self.engine) as session:
            return list(session.execute(select(Tenant.tenant_id).order_by(Tenant.tenant_id)).scalars())

    @activity.defn(name="embed_batch")
    def embed_batch(self, request: EmbedBatchInput) -> EmbedBatchResult:
        """Embed up to ``batch_size`` heads lacking a current-model vector; refuse stale ones on write."""
        model = self.embedder.name
        with shielded_session(self.engine, request.tenant_id) as session:
            pending = pending_batch(session, request.tenant_id, model, request.batch_size)
        if not pending:
            return EmbedBatchResult(0, 0, 0, model)
        vectors = self.embedder.embed([item.text for item in pending])
        with shielded_session(self.engine, request.tenant_id) as session:
            written, refused = store_vectors(session, request.tenant_id, model, list(zip(pending, vectors)))
        return EmbedBatchResult(len(pending), written, refused, model)

    def all(self) -> list[object]:
        return [self.tenants, self.embed_batch]
