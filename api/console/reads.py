"""Lists the console shows that the API has no endpoint for, each filtered by the domain's own rule.

A page first passes the API's gate for the object (the task, the job), so these only read what that gate
already allowed, or ask the domain rule row by row (:func:`memory.deletion.jobs.readable_job`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, select

from memory.db import tenant_session
from memory.deletion.jobs import readable_job
from memory.errors import NotFound
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry, DeletionJob, Memory, RetentionHold
from memory.recall import audit
from memory.store.memories import memories_about
from memory.tasks.models import TaskArtifact, TaskAttempt
from memory.tasks.pinned import pinned_definition


def task_artifacts(engine: Engine, tenant_id: str, task_id: str) -> list[TaskArtifact]:
    """A task's artifacts, newest first (the caller has passed the task's gate)."""
    with tenant_session(engine, tenant_id) as session:
        return list(
            session.execute(
                select(TaskArtifact)
                .where(TaskArtifact.tenant_id == tenant_id, TaskArtifact.task_id == task_id)
                .order_by(TaskArtifact.created_at.desc(), TaskArtifact.sha256)
            ).scalars()
        )


@dataclass(frozen=True)
class StepLine:
    step_id: str
    kind: str | None
    """None when the task's definition version cannot be found (only its records name the step)."""
    description: str | None = None


def task_steps(
    engine: Engine, tenant_id: str, task_type: str | None, version: str | None, recorded: list[str]
) -> list[StepLine]:
    """The steps of the definition version the task pinned, in order, with their kinds; when that version cannot
    be found, the step ids its records name (``recorded``, in order), kinds unknown."""
    definition = None
    if task_type and version:
        with tenant_session(engine, tenant_id) as session:
            definition = pinned_definition(session, tenant_id, task_type, version)
    if definition is None:
        return [StepLine(step_id, None) for step_id in dict.fromkeys(recorded)]
    return [StepLine(step.step_id, step.kind, step.spec.get("description")) for step in definition.steps]


def agent_claim(engine: Engine, tenant_id: str, task_id: str, step_id: str) -> TaskAttempt | None:
    """The agent's attempt holding the step, or the last one that held it while nobody completed, failed or
    re-claimed it (its lease may have run out since: :mod:`memory.tasks.leases` marks that at the next call)."""
    with tenant_session(engine, tenant_id) as session:
        return session.execute(
            select(TaskAttempt)
            .where(TaskAttempt.tenant_id == tenant_id, TaskAttempt.task_id == task_id, TaskAttempt.step_id == step_id,
                   TaskAttempt.status == "RUNNING", TaskAttempt.lease_expires_at.is_not(None))
            .order_by(TaskAttempt.started_at.desc())
            .limit(1)
        ).scalar_one_or_none()


def deletion_jobs(engine: Engine, principal: PrincipalContext, limit: int = 50) -> list[DeletionJob]:
    """The tenant's newest jobs this principal may read (:func:`readable_job`, the API's rule)."""
    readable: list[DeletionJob] = []
    with tenant_session(engine, principal.tenant_id) as session:
        recent = session.execute(
            select(DeletionJob.job_id)
            .where(DeletionJob.tenant_id == principal.tenant_id)
            .order_by(DeletionJob.updated_at.desc(), DeletionJob.job_id)
            .limit(500)
        ).scalars()
        for job_id in recent:
            try:
                readable.append(readable_job(session, principal, job_id))
            except NotFound:
                continue
            if len(readable) == limit:
                break
    return readable


def holds(engine: Engine, tenant_id: str) -> list[RetentionHold]:
    """The tenant's holds still in force (the page shows them to admins only, who alone set and lift them)."""
    with tenant_session(engine, tenant_id) as session:
        return list(
            session.execute(
                select(RetentionHold)
                .where(RetentionHold.tenant_id == tenant_id, RetentionHold.released_at.is_(None))
                .order_by(RetentionHold.created_at.desc())
            ).scalars()
        )


def my_memories(engine: Engine, principal: PrincipalContext) -> list[Memory]:
    with tenant_session(engine, principal.tenant_id) as session:
        return memories_about(session, principal, limit=500)


def my_bundles(engine: Engine, principal: PrincipalContext, limit: int = 20) -> list[AuditEntry]:
    """MEMORY_BUNDLE_BUILT events of recalls this person made: why each of their memories was used.

    (Reading everybody's is the API's ``GET /recall/audit``, for admins, auditors and operators.)"""
    with tenant_session(engine, principal.tenant_id) as session:
        return list(
            session.execute(
                select(AuditEntry)
                .where(
                    AuditEntry.tenant_id == principal.tenant_id,
                    AuditEntry.action == audit.ACTION,
                    AuditEntry.actor == principal.user_id,
                )
                .order_by(AuditEntry.audit_id.desc())
                .limit(limit)
            ).scalars()
        )
