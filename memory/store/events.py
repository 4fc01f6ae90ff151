"""Source events (messages, tool results, task events), idempotent by (tenant, idempotency key)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.enums import EventKind
from memory.epochs import guard_write
from memory.errors import IdempotencyConflict
from memory.identity.auth import PrincipalContext
from memory.models import MemoryEvent


def request_digest(body: dict[str, Any]) -> str:
    """A stable digest of a request body, so a replay can be told from a different request."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def next_revision(session: Session) -> int:
    return int(session.execute(text("SELECT nextval('mnemo_revision_seq')")).scalar_one())


@dataclass(frozen=True)
class NewEvent:
    idempotency_key: str
    kind: EventKind
    payload: dict[str, Any]
    occurred_at: datetime
    session_id: str | None = None


@dataclass(frozen=True)
class EventRecorded:
    event: MemoryEvent
    replayed: bool


def insert_once(
    session: Session, principal: PrincipalContext, *, idempotency_key: str, digest: str, kind: EventKind,
    payload: dict[str, Any], occurred_at: datetime, session_id: str | None, sequence_no: int | None = None,
) -> uuid.UUID | None:
    """Insert an event of the caller's unless the caller already stored ``idempotency_key``: the new event's id,
    or None when the key was taken (by an earlier request, or by one racing this one: the statement waits for
    it). Keys are the writer's own (0023): another user's equal key is another key, never a conflict."""
    inserted: uuid.UUID | None = session.execute(
        insert(MemoryEvent)
        .values(
            tenant_id=principal.tenant_id,
            event_id=uuid.uuid4(),
            idempotency_key=idempotency_key,
            request_sha256=digest,
            kind=kind.value,
            user_id=principal.user_id,
            agent_id=principal.agent_id,
            session_id=session_id,
            sequence_no=sequence_no,
            payload=payload,
            occurred_at=occurred_at,
            revision=next_revision(session),
        )
        .on_conflict_do_nothing(index_elements=["tenant_id", "user_id", "idempotency_key"])
        .returning(MemoryEvent.event_id)
    ).scalar_one_or_none()
    return inserted


def record_event(session: Session, principal: PrincipalContext, new: NewEvent, digest: str) -> EventRecorded:
    """Store an event once. A replay with the same body returns the first result; another body is a 409."""
    guard_write(session, principal.tenant_id, principal.user_id, None)
    inserted = insert_once(session, principal, idempotency_key=new.idempotency_key, digest=digest, kind=new.kind,
                           payload=new.payload, occurred_at=new.occurred_at, session_id=new.session_id)
    existing = session.execute(
        select(MemoryEvent).where(
            MemoryEvent.tenant_id == principal.tenant_id,
            MemoryEvent.user_id == principal.user_id,
            MemoryEvent.idempotency_key == new.idempotency_key,
        )
    ).scalar_one()
    if inserted is not None:
        return EventRecorded(existing, replayed=False)
    if existing.request_sha256 != digest:
        raise IdempotencyConflict(
            f"idempotency key {new.idempotency_key!r} was already used with a different request body; "
            "use a new key for a new event",
            details={"event_id": str(existing.event_id)},
        )
    return EventRecorded(existing, replayed=True)
