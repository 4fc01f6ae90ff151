"""Source events: messages, tool results and task events (POST /memory-events)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel

from api.schemas.common import Lax, ShortText, StrictRequest, Timestamp
from memory.enums import EventKind
from memory.store.events import EventRecorded, NewEvent


class EventIn(StrictRequest):
    idempotency_key: ShortText
    kind: Annotated[EventKind, Lax]
    payload: dict[str, Any]
    occurred_at: Timestamp
    session_id: ShortText | None = None

    def new(self) -> NewEvent:
        return NewEvent(idempotency_key=self.idempotency_key, kind=self.kind, payload=self.payload,
                        occurred_at=self.occurred_at, session_id=self.session_id)


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

    @classmethod
    def of(cls, recorded: EventRecorded) -> EventOut:
        event = recorded.event
        return cls(event_id=event.event_id, idempotency_key=event.idempotency_key, kind=event.kind,
                   session_id=event.session_id, occurred_at=event.occurred_at, stored_at=event.stored_at,
                   revision=event.revision, replayed=recorded.replayed)
