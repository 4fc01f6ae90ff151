"""SQLAlchemy mappings of per-agent resource policies and of runs with their frozen snapshots (migration 0016)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Text, func
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base


class ResourcePolicy(Base):
    """What an admin lets one agent do with one resource type; no row means no access to the type."""

    __tablename__ = "resource_policies"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    agent_id: Mapped[str] = mapped_column(Text, primary_key=True)
    resource: Mapped[str] = mapped_column(Text, primary_key=True)
    operations: Mapped[list[str]] = mapped_column(ARRAY(Text))
    fields: Mapped[list[str]] = mapped_column(ARRAY(Text))
    """Field paths (JSON Pointers, ``*`` for array items), each one the declaration's schema has."""
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_by: Mapped[str] = mapped_column(Text)


class ResourceRun(Base):
    """One run of an agent, registered by a trusted runtime, reading for the runtime key's user."""

    __tablename__ = "resource_runs"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    run_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text)
    agent_id: Mapped[str] = mapped_column(Text)
    thread_id: Mapped[str] = mapped_column(Text)
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSONB)
    """resource → ``{"operations": [...], "fields": [...]}``: the access frozen when the run started."""
    registered_by: Mapped[str] = mapped_column(Text)
    """The key id of the runtime that registered the run."""
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
