"""Which tenants a sweep visits: every tenant (the listing every per-tenant sweep started with), or a page of
those with work by the sweep's own rule, read across tenants in one statement."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine
from temporalio import activity

from memory.db import global_session
from memory.identity.tenants import Due, listing_session, tenant_page
from memory.knowledge.review import has_unreviewed
from memory.sessions.policy import CommitPolicy, sweep_due
from memory.store.vectors import has_backlog


class SweepKind(StrEnum):
    EVERY = "every"
    """Every tenant (the retention sweep's rules depend on each tenant's policy)."""
    EMBEDDING = "embedding"
    SESSION_COMMIT = "session_commit"
    KNOWLEDGE_REVIEW = "knowledge_review"


@dataclass(frozen=True)
class TenantPageRequest:
    kind: SweepKind
    after: str | None
    limit: int


class TenantActivities:
    def __init__(self, engine: Engine, model: Callable[[], str] | None = None,
                 commit_policy: CommitPolicy | None = None) -> None:
        self.engine = engine
        self._model = model
        self.commit_policy = commit_policy or CommitPolicy()

    @activity.defn(name="retention_tenants")
    def tenants(self) -> list[str]:
        """Every tenant's id. Registered under the name the retention sweep gave it first: the histories of
        running sweeps name it so (an activity's name is part of a workflow's history)."""
        with global_session(self.engine) as session:
            return tenant_page(session, None, None)

    @activity.defn(name="embedding_tenants")
    def embedding_tenants(self) -> list[str]:
        """The same list, under the name EmbeddingSweep runs started before ``workflows.sweeps.SHARED_TENANTS``
        scheduled it by: such a run replays, and may still be waiting for it. Goes with that patch."""
        return self.tenants()

    @activity.defn(name="tenant_page")
    def tenant_page(self, request: TenantPageRequest) -> list[str]:
        """Up to ``limit`` tenants after ``after`` that have work for the sweep ``kind`` (by the rule its
        per-tenant activity applies), sorted."""
        with listing_session(self.engine) as session:
            return tenant_page(session, request.after, request.limit, self._due(request.kind))

    def _due(self, kind: SweepKind) -> Due | None:
        now = datetime.now(UTC)
        match kind:
            case SweepKind.EVERY:
                return None
            case SweepKind.EMBEDDING:
                if self._model is None:
                    raise ValueError("this worker has no embedding model to list the embedding backlog by")
                model = self._model()
                return lambda tenant: has_backlog(tenant, model)
            case SweepKind.SESSION_COMMIT:
                return lambda tenant: sweep_due(tenant, self.commit_policy, now)
            case SweepKind.KNOWLEDGE_REVIEW:
                return lambda tenant: has_unreviewed(tenant, now)

    def all(self) -> list[Callable[..., Any]]:
        return [self.tenants, self.embedding_tenants, self.tenant_page]
