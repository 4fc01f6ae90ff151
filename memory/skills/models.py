"""The tables of pushed skills (migration 0031): content-addressed file blobs and immutable, numbered versions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base


class SkillBlob(Base):
    """One file's text, stored once per tenant whatever the number of versions naming its hash."""

    __tablename__ = "skill_blobs"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    content: Mapped[str] = mapped_column(Text)


class SkillVersion(Base):
    """One pushed directory of a skill in a space (TENANT, or AGENT for ``agent_id``): never changed once written;
    ``version`` counts 1, 2, ... per (tenant, space, agent, name)."""

    __tablename__ = "skill_versions"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    space: Mapped[str] = mapped_column(Text, primary_key=True)
    agent_id: Mapped[str] = mapped_column(Text, primary_key=True)
    """'' for a TENANT skill."""
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    manifest: Mapped[dict[str, str]] = mapped_column(JSONB)
    tree_sha256: Mapped[str] = mapped_column(Text)
    declared_version: Mapped[str] = mapped_column(Text)
    pushed_by: Mapped[str] = mapped_column(Text)
    pushed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
