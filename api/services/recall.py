"""Recall for every face of the API: REST's two POST routes and MCP's ``search_memories`` run the same pipeline
(:func:`memory.recall.service.recall`) with the same embedding lanes, reranker, audit and bundle metrics, so
"mnemo's recall" means one thing wherever it is asked.

The per-tenant recall limit is the admission limiter's ``recall`` class (``app.state.recall_limiter``): the
admission middleware holds a slot for each REST recall; an MCP call (admitted as a ``read``) takes its recall
slot here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.datastructures import State

from api.limits import EmbeddingLanes, TenantLimiter
from api.observability.logging import bind_tenant
from api.observability.metrics import observe_bundle
from memory.db import tenant_session
from memory.embedders.rerank import Reranker
from memory.identity.auth import PrincipalContext, authenticated_session
from memory.recall.bundle_types import Bundle, TaskState
from memory.recall.service import RecallOptions, recall
from memory.resources.catalog import only_internal


@dataclass(frozen=True)
class Recaller:
    """The app's recall: its database, query-embedding lanes, rerank stage and per-tenant recall limiter."""

    engine: Engine
    lanes: EmbeddingLanes
    reranker: Reranker | None
    limiter: TenantLimiter

    @classmethod
    def of(cls, state: State) -> Recaller:
        """The one set the API process started with (``create_app``'s lifespan)."""
        return cls(state.engine, state.embedding_lanes, state.reranker, state.recall_limiter)

    def with_key(self, key: str, query: str, options: RecallOptions, task_state: TaskState | None = None) -> Bundle:
        """REST: the key is checked by the first statement of the bundle's own transaction (one connection);
        the admission middleware already holds the recall slot."""
        now = datetime.now(UTC)
        with authenticated_session(self.engine, key) as (session, principal):
            bind_tenant(principal.tenant_id)
            only_internal(principal, "recall")
            bundle = self._recall(session, principal, query, now, options, task_state)
        observe_bundle(bundle)
        return bundle

    def as_principal(self, principal: PrincipalContext, query: str, options: RecallOptions) -> Bundle:
        """MCP: the caller's access was checked by the tool; the recall takes one of the tenant's recall slots."""
        with tenant_session(self.engine, principal.tenant_id) as session, self.limiter.slot(principal.tenant_id):
            bundle = self._recall(session, principal, query, datetime.now(UTC), options, None)
        observe_bundle(bundle)
        return bundle

    def _recall(self, session: Session, principal: PrincipalContext, query: str, now: datetime,
                options: RecallOptions, task_state: TaskState | None) -> Bundle:
        return recall(session, principal, query, now, options, task_state=task_state, embedding=self.lanes,
                      reranker=self.reranker)
