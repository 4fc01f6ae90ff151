"""SQLAlchemy mappings of the artifact store's tables (schema: ``migrations/versions/0024_artifact_store.py``).

The stores read and write them with their own SQL (:mod:`.postgres`, :mod:`activities.stores`); the mappings say
what the schema is, so that a test can hold the migrations and the models to each other.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, ForeignKeyConstraint, Integer, LargeBinary, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base


class ArtifactObject(Base):
    """One stored artifact: its namespace (``tasks``, ``records/<tenant hash>``, ``publications``) and sha256."""

    __tablename__ = "artifact_objects"

    namespace: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    chunk_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ArtifactChunk(Base):
    """At most 1 MiB of an artifact's bytes, the ``seq``-th."""

    __tablename__ = "artifact_chunks"
    __table_args__ = (ForeignKeyConstraint(["namespace", "sha256"],
                                           ["artifact_objects.namespace", "artifact_objects.sha256"],
                                           ondelete="CASCADE"),)

    namespace: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Publication(Base):
    """A destination's report by the hash of its idempotency key: its files (artifacts) and metadata."""

    __tablename__ = "publications"

    destination: Mapped[str] = mapped_column(Text, primary_key=True)
    key_hash: Mapped[str] = mapped_column(Text, primary_key=True)
    operation_id: Mapped[str] = mapped_column(Text)
    files: Mapped[Any] = mapped_column(JSONB)
    metadata_: Mapped[Any] = mapped_column("metadata", JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class PublicationOperation(Base):
    """Which publication an operation produced or found, so a reconciliation finds it by operation."""

    __tablename__ = "publication_operations"

    destination: Mapped[str] = mapped_column(Text, primary_key=True)
    operation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    key_hash: Mapped[str] = mapped_column(Text)
