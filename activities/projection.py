"""Activities that maintain the search projection."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import Engine
from temporalio import activity

from activities.db import shielded_session
from memory.store.projection import rebuild_batch


@dataclass(frozen=True)
class RebuildBatchInput:
    tenant_id: str
    after_memory_id: str | None
    batch_size: int


@dataclass(frozen=True)
class RebuildBatchResult:
    rebuilt: int
    last_memory_id: str | None


class ProjectionActivities:
    """Holds the engine; each batch is one tenant-scoped transaction, so a retry redoes it whole."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @activity.defn(name="rebuild_projection_batch")
    def rebuild_projection_batch(self, request: RebuildBatchInput) -> RebuildBatchResult:
        after = uuid.UUID(request.after_memory_id) if request.after_memory_id else None
        with shielded_session(self.engine, request.tenant_id) as session:
            ids = rebuild_batch(session, request.tenant_id, after, request.batch_size)
        return RebuildBatchResult(rebuilt=len(ids), last_memory_id=str(ids[-1]) if ids else None)
