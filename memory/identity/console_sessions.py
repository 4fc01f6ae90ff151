"""The console's one table (migration 0017): server-side sessions of people signed in with an API key."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base


class ConsoleSession(Base):
    """The cookie carries the session id; only its sha256 is stored, with the key's id (not its secret)."""

    __tablename__ = "console_sessions"

    session_sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    key_id: Mapped[str] = mapped_column(Text, ForeignKey("api_keys.key_id", ondelete="CASCADE"))
    csrf_token: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
