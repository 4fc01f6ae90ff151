"""SQLAlchemy mappings of sessions, their summaries, commits, links and choices (migration 0013)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, ForeignKey, ForeignKeyConstraint, Integer, Text, func
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base


class ChatSession(Base):
    """One conversation of a user (and agent). Its row lock hands out the messages' ``sequence_no``."""

    __tablename__ = "sessions"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    """Session ids are each user's own (0023): two users may both have a session ``s1``."""
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    agent_id: Mapped[str | None] = mapped_column(Text)
    project_id: Mapped[str | None] = mapped_column(Text)
    task_id: Mapped[str | None] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default="active")
    request_sha256: Mapped[str] = mapped_column(Text)
    profile_snapshot: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default="[]")
    """Refs to the profile memories injected at start: ids, versions and sources, never their text."""
    next_sequence: Mapped[int] = mapped_column(BigInteger, server_default="1")
    committed_through: Mapped[int] = mapped_column(BigInteger, server_default="0")
    """The last sequence number a commit has claimed: the next commit starts after it."""
    writer_roles: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    """Roles of the key that last posted messages: a commit started by policy writes with them."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_message_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revision: Mapped[int] = mapped_column(BigInteger)
    purged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SessionSummary(Base):
    """One immutable version of a session's structured summary (seed 003 §5)."""

    __tablename__ = "session_summaries"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "user_id", "session_id"],
                             ["sessions.tenant_id", "sessions.user_id", "sessions.session_id"]),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    summary_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    commit_id: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    """``commit`` or ``rebuilt_after_deletion``."""
    from_sequence: Mapped[int] = mapped_column(BigInteger)
    to_sequence: Mapped[int] = mapped_column(BigInteger)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB)
    abstract: Mapped[str] = mapped_column(Text)
    overview: Mapped[str] = mapped_column(Text)
    evidence_refs: Mapped[list[str]] = mapped_column(JSONB, server_default="[]")
    task_observation: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    superseded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    purged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revision: Mapped[int] = mapped_column(BigInteger)


class SessionCommit(Base):
    """One ``session.commit``: the stage it covers, its workflow, and what it produced."""

    __tablename__ = "session_commits"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "user_id", "session_id"],
                             ["sessions.tenant_id", "sessions.user_id", "sessions.session_id"]),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    commit_id: Mapped[str] = mapped_column(Text, primary_key=True)
    workflow_id: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    trigger: Mapped[str] = mapped_column(Text)
    requested_by: Mapped[str] = mapped_column(Text)
    requester_roles: Mapped[list[str]] = mapped_column(ARRAY(Text))
    held_epoch: Mapped[int] = mapped_column(BigInteger)
    """The owner's deletion epoch when the commit was accepted: a deletion since means nothing is written."""
    from_sequence: Mapped[int] = mapped_column(BigInteger)
    to_sequence: Mapped[int] = mapped_column(BigInteger)
    summary_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    memories: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    stats: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    reasons: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default="[]")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SessionLink(Base):
    """What a session used (``used``: bundles, the profile) and produced (``created``, ``merged``)."""

    __tablename__ = "session_links"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "user_id", "session_id"],
                             ["sessions.tenant_id", "sessions.user_id", "sessions.session_id"]),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    target: Mapped[str] = mapped_column(Text, primary_key=True)
    relation: Mapped[str] = mapped_column(Text, primary_key=True)
    commit_id: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class SessionChoice(Base):
    """A temporary constraint a user chose in a session; the same choice in three sessions is an E3 preference."""

    __tablename__ = "session_choices"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "event_id"], ["memory_events.tenant_id", "memory_events.event_id"], ondelete="CASCADE"
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    choice_key: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text)
    session_id: Mapped[str] = mapped_column(Text)
    choice_value: Mapped[str] = mapped_column(Text)
