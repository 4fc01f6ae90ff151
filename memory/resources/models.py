"""SQLAlchemy mappings of source records, their long bodies and their search projection (migration 0014)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, ForeignKey, ForeignKeyConstraint, Integer, Text, func
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base

RECORD_KEY = ("tenant_id", "owner_id", "resource", "record_id")
"""A record is its owner's: two users of a tenant may each have a ``todo:1`` of their own."""


def _of_record() -> ForeignKeyConstraint:
    return ForeignKeyConstraint(list(RECORD_KEY), [f"resource_records.{column}" for column in RECORD_KEY],
                                ondelete="CASCADE")


class ResourceRecord(Base):
    """The current version of one business record (a todo, an episode, ...): the truth search re-reads."""

    __tablename__ = "resource_records"

    tenant_id: Mapped[str] = mapped_column(Text, ForeignKey("tenants.tenant_id"), primary_key=True)
    owner_id: Mapped[str] = mapped_column(Text, primary_key=True)
    resource: Mapped[str] = mapped_column(Text, primary_key=True)
    record_id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    """The record without its long fields' values, which are in the artifact store (:class:`ResourceArtifact`)."""
    data_sha256: Mapped[str] = mapped_column(Text)
    """Of the whole data, long fields included: the same data written again is a replay, not a new version."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    revision: Mapped[int] = mapped_column(BigInteger)


class ResourceArtifact(Base):
    """A long field of a record's current version, stored in the artifact store under its sha256."""

    __tablename__ = "resource_artifacts"
    __table_args__ = (_of_record(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_id: Mapped[str] = mapped_column(Text, primary_key=True)
    resource: Mapped[str] = mapped_column(Text, primary_key=True)
    record_id: Mapped[str] = mapped_column(Text, primary_key=True)
    field_path: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text)
    """Of the value's JSON encoding (UTF-8), which is what the store holds."""
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    characters: Mapped[int] = mapped_column(BigInteger)


class ResourceSearch(Base):
    """One searchable field of a record's current version: its normalised text and its lexemes.

    Kept per declared field path, so a search can match only the fields a run may read (seed 000 §3.2).
    """

    __tablename__ = "resource_search"
    __table_args__ = (_of_record(),)

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    owner_id: Mapped[str] = mapped_column(Text, primary_key=True)
    resource: Mapped[str] = mapped_column(Text, primary_key=True)
    record_id: Mapped[str] = mapped_column(Text, primary_key=True)
    field_path: Mapped[str] = mapped_column(Text, primary_key=True)
    """The declared path (``/participants/*/display_name``), not a concrete one: the unit a whitelist grants."""
    version: Mapped[int] = mapped_column(Integer)
    search_text: Mapped[str] = mapped_column(Text)
    tokens: Mapped[Any] = mapped_column(TSVECTOR)
    source_revision: Mapped[int] = mapped_column(BigInteger)
