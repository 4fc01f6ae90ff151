"""Source events: messages, tool results and task events (POST /memory-events)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel

from api.schemas.common import Lax, ShortText, StrictRequest, Timestamp
from memory.enums import EventKind


class EventIn(StrictRequest):
    idempotency_key: ShortText
    kind: Annotated[EventKind, Lax]
    payload: dict[str, Any]
    occurred_at: Timestamp
    session_id: ShortText | None = None


class EventOut(BaseModel):
    event_id: uuid.UUID
    idempotency_key: str
    kind: str
    session_id: str | None
    occurred_at: AwareDatetime
    stored_at: AwareDatetime
    revision: int
    stage: Literal["committed"] = "committed"
    replayed: bool
