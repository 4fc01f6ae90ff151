"""SQLAlchemy mappings of knowledge (schema: ``migrations/versions/0030_knowledge.py``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import DateTime, ForeignKey, ForeignKeyConstraint, Integer, Text, func
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base


class KnowledgeContent:
    """What a candidate proposes and an item publishes: the same columns in both tables (a mixin, one home)."""

    key: Mapped[str | None] = mapped_column(Text)
    claim: Mapped[str] = mapped_column(Text)
    structured: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    authority: Mapped[str] = mapped_column(Text)
    scope_type: Mapped[str] = mapped_column(Text)
    project_id: Mapped[str | None] = mapped_column(Text)
    source_refs: Mapped[list[str]] = mapped_column(ARRAY(Text))
    evidence: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default="[]")
    valid_from: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class KnowledgeCandidate(KnowledgeContent, Base):
    """A proposal under review: redacted before it was stored; ``state_version`` orders every decision."""

    __tablename__ = "knowledge_candidates"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    candidate_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, server_default="1")
    """The content's version: a revision after ``request_changes`` adds one."""
    state_version: Mapped[int] = mapped_column(Integer, server_default="1")
    """Every change of the row adds one: a review names the one it saw."""
    status: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text, server_default="knowledge")
    skill_name: Mapped[str | None] = mapped_column(Text)
    supersedes: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    origin: Mapped[str] = mapped_column(Text)
    origin_ref: Mapped[str | None] = mapped_column(Text)
    author_user_id: Mapped[str] = mapped_column(Text)
    author_agent_id: Mapped[str | None] = mapped_column(Text)
    content_sha256: Mapped[str] = mapped_column(Text)
    redactions: Mapped[list[dict[str, str]]] = mapped_column(JSONB, server_default="[]")
    duplicates: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default="[]")
    conflicts: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default="[]")
    review_deadline: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    review_started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When its review workflow first ran: None means no review watches it yet (the sweep starts one)."""
    reminders_sent: Mapped[int] = mapped_column(Integer, server_default="0")
    decision: Mapped[str | None] = mapped_column(Text)
    decision_reason: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[str | None] = mapped_column(Text)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    knowledge_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    knowledge_version: Mapped[int | None] = mapped_column(Integer)
    idempotency_key: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class KnowledgeItem(KnowledgeContent, Base):
    """One published version of a knowledge item, with the search columns written in its publishing transaction."""

    __tablename__ = "knowledge_items"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "candidate_id"],
                             ["knowledge_candidates.tenant_id", "knowledge_candidates.candidate_id"]),
    )

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    knowledge_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(Text)
    candidate_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    author_user_id: Mapped[str] = mapped_column(Text)
    reviewer_user_id: Mapped[str] = mapped_column(Text)
    published_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    supersedes_version: Mapped[int | None] = mapped_column(Integer)
    content_sha256: Mapped[str] = mapped_column(Text)
    withdrawn_reason: Mapped[str | None] = mapped_column(Text)
    search_text: Mapped[str] = mapped_column(Text)
    tokens: Mapped[Any] = mapped_column(TSVECTOR)
    embedding: Mapped[Any | None] = mapped_column(Vector())
    embedding_model: Mapped[str | None] = mapped_column(Text)
