"""Recall for every face of the API: REST's two POST routes and MCP's ``search_memories`` run the same pipeline
(:func:`memory.recall.service.recall`) with the same task source (:func:`task_found`), embedding lanes,
reranker, audit and bundle metrics, so "mnemo's recall" means one thing wherever it is asked.

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
from api.services.client import ClientSource
from api.services.tasks import live_task_state, resumable_task_state
from memory.db import tenant_session
from memory.embedders.rerank import Reranker
from memory.identity.auth import PrincipalContext, authenticated_session
from memory.recall.bundle_types import Bundle, TaskFound
from memory.recall.plan import RecallPlan, SourceType
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

    def with_key(self, key: str, query: str, options: RecallOptions, task: TaskFound | None = None) -> Bundle:
        """REST: the key is checked by the first statement of the bundle's own transaction (one connection);
        the admission middleware already holds the recall slot."""
        now = datetime.now(UTC)
        with authenticated_session(self.engine, key) as (session, principal):
            bind_tenant(principal.tenant_id)
            only_internal(principal, "recall")
            bundle = self._recall(session, principal, query, now, options, task)
        observe_bundle(bundle)
        return bundle

    def as_principal(self, principal: PrincipalContext, query: str, options: RecallOptions,
                     task: TaskFound | None = None) -> Bundle:
        """MCP: the caller's access was checked by the tool; the recall takes one of the tenant's recall slots."""
        with tenant_session(self.engine, principal.tenant_id) as session, self.limiter.slot(principal.tenant_id):
            bundle = self._recall(session, principal, query, datetime.now(UTC), options, task)
        observe_bundle(bundle)
        return bundle

    def _recall(self, session: Session, principal: PrincipalContext, query: str, now: datetime,
                options: RecallOptions, task: TaskFound | None) -> Bundle:
        return recall(session, principal, query, now, options, task=task, embedding=self.lanes,
                      reranker=self.reranker)


async def task_found(engine: Engine, temporal: ClientSource, principal: PrincipalContext, plan: RecallPlan,
                     task_id: str | None) -> TaskFound | None:
    """What the plan's task source reads, before the bundle's transaction (a Temporal call must not hold a
    connection): the named task's live state, or the caller's resumable tasks; None when it reads no task."""
    source = plan.reads(SourceType.TASK_STATE)
    if source is None:
        return None
    if task_id is not None:
        return TaskFound(await live_task_state(engine, temporal, principal, task_id))
    return await resumable_task_state(engine, temporal, principal, source.limit)
