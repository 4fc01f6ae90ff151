"""Retention sweep activities: find what outlived its keep period and open deletion jobs for it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine
from temporalio import activity

from activities.db import shielded_session
from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.scope import ScopeType
from memory.enums import Role
from memory.identity.auth import PrincipalContext
from memory.store.events import request_digest
from memory.store.retention import due_events, due_memories, expire_unconfirmed


@dataclass(frozen=True)
class SweepRequest:
    tenant_id: str
    limit: int


@dataclass(frozen=True)
class OpenedJob:
    tenant_id: str
    job_id: str
    workflow_id: str
    status: str


class RetentionActivities:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @activity.defn(name="retention_open_jobs")
    def open_jobs(self, request: SweepRequest) -> list[OpenedJob]:
        """Expire unconfirmed active memories; open one deletion job per record past its keep period
        (idempotent: the request id derives from the record)."""
        service = PrincipalContext(request.tenant_id, "retention", None, frozenset({Role.ADMIN.value}), "retention")
        now = datetime.now(UTC)
        opened: list[OpenedJob] = []
        with shielded_session(self.engine, request.tenant_id) as session:
            expire_unconfirmed(session, request.tenant_id, now, request.limit)
        with shielded_session(self.engine, request.tenant_id) as session:
            memory_ids = due_memories(session, request.tenant_id, now, request.limit)
            event_ids = due_events(session, request.tenant_id, now, request.limit)
        scopes = [(f"retention-memory-{m}", ScopeRequest(ScopeType.MEMORY, memory_id=m)) for m in memory_ids]
        scopes += [(f"retention-event-{e}", ScopeRequest(ScopeType.EVENT, event_id=e)) for e in event_ids]
        for request_id, scope in scopes:
            digest = request_digest({"retention": request_id})
            with shielded_session(self.engine, request.tenant_id) as session:
                job = request_deletion(session, service, request_id, scope, digest).job
                opened.append(OpenedJob(job.tenant_id, str(job.job_id), job.workflow_id, job.status))
        return opened
