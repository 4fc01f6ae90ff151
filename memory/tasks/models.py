"""SQLAlchemy mappings of the task read model (schema: ``migrations/versions/0003_tasks.py``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, ForeignKeyConstraint, Identity, Integer, Text, func
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base


def _task_fk() -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["tenant_id", "task_id"], ["tasks.tenant_id", "tasks.task_id"])


class Task(Base):
    """The read model of one task; ``state_version`` orders every write (optimistic locking)."""

    __tablename__ = "tasks"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    task_id: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_user_id: Mapped[str] = mapped_column(Text)
    task_type: Mapped[str] = mapped_column(Text)
    goal: Mapped[dict[str, Any]] = mapped_column(JSONB)
    request_intent_id: Mapped[str] = mapped_column(Text)
    create_key: Mapped[str] = mapped_column(Text)
    destination: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    current_step_id: Mapped[str | None] = mapped_column(Text)
    completed_step_ids: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    workflow_id: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    workflow_version: Mapped[str] = mapped_column(Text)
    state_version: Mapped[int] = mapped_column(Integer)
    last_transition_id: Mapped[str] = mapped_column(Text)
    waiting_reason: Mapped[str | None] = mapped_column(Text)
    draft_sha256: Mapped[str | None] = mapped_column(Text)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskStep(Base):
    """A step at one logical input version; a SUCCEEDED row is the step's idempotent result."""

    __tablename__ = "task_steps"
    __table_args__ = (_task_fk(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    task_id: Mapped[str] = mapped_column(Text, primary_key=True)
    step_id: Mapped[str] = mapped_column(Text, primary_key=True)
    input_version: Mapped[str] = mapped_column(Text, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    output: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    output_digest: Mapped[str | None] = mapped_column(Text)
    input_extra: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """What the step was opened with besides the goal (an agent step's reviewer's reason after a rejection)."""
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskAttempt(Base):
    """One try of a step. Every retry is a new row; failed tries are kept, never overwritten."""

    __tablename__ = "task_attempts"
    __table_args__ = (_task_fk(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    attempt_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    task_id: Mapped[str] = mapped_column(Text)
    step_id: Mapped[str] = mapped_column(Text)
    input_version: Mapped[str] = mapped_column(Text)
    attempt_number: Mapped[int] = mapped_column(Integer)
    temporal_attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(Text)
    input_digest: Mapped[str] = mapped_column(Text)
    output_digest: Mapped[str | None] = mapped_column(Text)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    worker: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """An agent's attempt (memory.tasks.leases) is live until then, on the database clock; a worker's has none."""
    lease_seconds: Mapped[int | None] = mapped_column(Integer)
    completion_digest: Mapped[str | None] = mapped_column(Text)
    """The digest of the agent's body that ended the attempt: the same body again is a replay."""
    actor: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class TaskArtifact(Base):
    """An artifact's metadata; its bytes live in the content-addressed store under the data dir."""

    __tablename__ = "task_artifacts"
    __table_args__ = (_task_fk(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    task_id: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    media_type: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    step_id: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskCheckpoint(Base):
    """A verifiable resume point (seed 003 §8.1), one per state_version."""

    __tablename__ = "task_checkpoints"
    __table_args__ = (_task_fk(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    checkpoint_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    task_id: Mapped[str] = mapped_column(Text)
    state_version: Mapped[int] = mapped_column(Integer)
    task_status: Mapped[str] = mapped_column(Text)
    current_step_id: Mapped[str | None] = mapped_column(Text)
    completed_step_ids: Mapped[list[str]] = mapped_column(ARRAY(Text))
    artifact_refs: Mapped[list[Any]] = mapped_column(JSONB)
    pending_conditions: Mapped[list[Any]] = mapped_column(JSONB)
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskApproval(Base):
    """An approval request bound to one artifact hash; a changed draft needs a new one."""

    __tablename__ = "task_approvals"
    __table_args__ = (_task_fk(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    approval_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    task_id: Mapped[str] = mapped_column(Text)
    approval_type: Mapped[str] = mapped_column(Text)
    artifact_sha256: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    requested_state_version: Mapped[int] = mapped_column(Integer)
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    deadline_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    decided_by: Mapped[str | None] = mapped_column(Text)
    decided_roles: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reason: Mapped[str | None] = mapped_column(Text)
    reminders_sent: Mapped[int] = mapped_column(Integer, server_default="0")


class TaskReminder(Base):
    __tablename__ = "task_reminders"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "approval_id"], ["task_approvals.tenant_id", "task_approvals.approval_id"]
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    approval_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    reminder_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskOperation(Base):
    """A side effect: its idempotency key, its operation id and what is known of its outcome."""

    __tablename__ = "task_operations"
    __table_args__ = (_task_fk(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    operation_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    task_id: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str] = mapped_column(Text)
    destination: Mapped[str] = mapped_column(Text)
    artifact_sha256: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    reconcile_attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    publication_id: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    resolved_by: Mapped[str | None] = mapped_column(Text)
    resolution_note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TenantWebhook(Base):
    """Where a tenant's reminders are delivered (migration 0018); the secret signs them and is never returned."""

    __tablename__ = "tenant_webhooks"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_by: Mapped[str] = mapped_column(Text)


class PublishDestination(Base):
    """A tenant's named publish destination (migration 0026); a webhook's secret signs and is never returned."""

    __tablename__ = "publish_destinations"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    url: Mapped[str | None] = mapped_column(Text)
    secret: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskDefinitionRow(Base):
    """One registered version of a tenant's task type (migration 0027): immutable; ``seq`` orders the versions."""

    __tablename__ = "task_definitions"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    task_type: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[str] = mapped_column(Text, primary_key=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB)
    body_sha256: Mapped[str] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(BigInteger, Identity(always=True))
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskSchedule(Base):
    """A tenant's named schedule (migration 0029): the registry of what fires; Temporal holds only the timer."""

    __tablename__ = "task_schedules"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_user_id: Mapped[str] = mapped_column(Text)
    task_type: Mapped[str] = mapped_column(Text)
    goal: Mapped[dict[str, Any]] = mapped_column(JSONB)
    cron: Mapped[str] = mapped_column(Text)
    timezone: Mapped[str] = mapped_column(Text)
    paused: Mapped[bool] = mapped_column(Boolean, server_default="false")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_task_id: Mapped[str | None] = mapped_column(Text)
    last_error: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
