"""Source events (messages, tool results, task events), idempotent by (tenant, idempotency key)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import ARRAY, Text, any_, bindparam, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.enums import EventKind
from memory.epochs import guard_write
from memory.errors import IdempotencyConflict, MnemoError
from memory.identity.auth import PrincipalContext
from memory.models import MemoryEvent


def request_digest(body: dict[str, Any]) -> str:
    """A stable digest of a request body, so a replay can be told from a different request."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def next_revision(session: Session) -> int:
    return int(session.execute(text("SELECT nextval('mnemo_revision_seq')")).scalar_one())


def next_revisions(session: Session, count: int) -> list[int]:
    """``count`` revisions in one statement, in order (a batch's rows take them as single writes would)."""
    if count == 0:
        return []
    drawn = session.execute(text("SELECT nextval('mnemo_revision_seq') FROM generate_series(1, :n)"), {"n": count})
    return sorted(int(value) for value in drawn.scalars())


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
    (recorded,) = record_events(session, principal, [(new, digest)])
    if isinstance(recorded, MnemoError):
        raise recorded
    return recorded


EventItem = tuple[NewEvent, str] | MnemoError
"""An event to record with its request digest, or the error that already refused it (a body that did not parse)."""


def record_events(session: Session, principal: PrincipalContext, items: Sequence[EventItem]
                  ) -> list[EventRecorded | MnemoError]:
    """Store each event of ``items`` once, in order, in the caller's transaction: one look-up of the keys, one
    multi-row INSERT. An item's result is what :func:`record_event` gives for it alone, or the error that refuses
    it (a key used with another body); an item with the key of an earlier one of the batch is that one's replay."""
    guard_write(session, principal.tenant_id, principal.user_id, None)
    keys = {item[0].idempotency_key for item in items if not isinstance(item, MnemoError)}
    stored = _events_by_key(session, principal, keys)
    fresh: dict[str, tuple[NewEvent, str]] = {}
    for item in items:
        if not isinstance(item, MnemoError) and item[0].idempotency_key not in stored:
            fresh.setdefault(item[0].idempotency_key, item)
    inserted = _insert_events(session, principal, list(fresh.values()))
    stored |= inserted | _events_by_key(session, principal, set(fresh) - set(inserted))  # a racing request's
    results: list[EventRecorded | MnemoError] = []
    for item in items:
        if isinstance(item, MnemoError):
            results.append(item)
            continue
        new, digest = item
        first = inserted.pop(new.idempotency_key, None) is not None  # a later item with its key replays this one
        results.append(_outcome(stored[new.idempotency_key], digest, first))
    return results


def _outcome(event: MemoryEvent, digest: str, inserted: bool) -> EventRecorded | MnemoError:
    """One item's result, its key stored as ``event``: new (``inserted`` by this item), a replay of the same
    body, or the conflict of another body."""
    if inserted:
        return EventRecorded(event, replayed=False)
    if event.request_sha256 != digest:
        return IdempotencyConflict(
            f"idempotency key {event.idempotency_key!r} was already used with a different request body; "
            "use a new key for a new event",
            details={"event_id": str(event.event_id)},
        )
    return EventRecorded(event, replayed=True)


def _events_by_key(session: Session, principal: PrincipalContext, keys: set[str]) -> dict[str, MemoryEvent]:
    """The caller's stored events with these idempotency keys (keys are the writer's own, 0023)."""
    if not keys:
        return {}
    found = session.execute(
        select(MemoryEvent).where(
            MemoryEvent.tenant_id == principal.tenant_id,
            MemoryEvent.user_id == principal.user_id,
            MemoryEvent.idempotency_key == any_(bindparam("keys", list(keys), type_=ARRAY(Text))),
        )
    ).scalars()
    return {event.idempotency_key: event for event in found}


INSERT_EVENTS = text("""
    INSERT INTO memory_events (tenant_id, event_id, idempotency_key, request_sha256, kind, user_id, agent_id,
                               session_id, payload, occurred_at, revision)
    SELECT :tenant_id, e.event_id, e.idempotency_key, e.request_sha256, e.kind, :user_id, :agent_id, e.session_id,
           e.payload, e.occurred_at, nextval('mnemo_revision_seq')
    FROM unnest(CAST(:event_id AS uuid[]), CAST(:idempotency_key AS text[]), CAST(:request_sha256 AS text[]),
                CAST(:kind AS text[]), CAST(:session_id AS text[]), CAST(:payload AS jsonb[]),
                CAST(:occurred_at AS timestamptz[]))
         AS e(event_id, idempotency_key, request_sha256, kind, session_id, payload, occurred_at)
    ON CONFLICT (tenant_id, user_id, idempotency_key) DO NOTHING
    RETURNING event_id, stored_at, revision
""")
"""A batch's events in one statement whose text never changes with the batch's size (a list per column)."""


def _insert_events(session: Session, principal: PrincipalContext, items: list[tuple[NewEvent, str]]
                   ) -> dict[str, MemoryEvent]:
    """One INSERT of every new event; a key a racing request stored first is skipped (the statement waits for
    it). Returns the events inserted, by key."""
    if not items:
        return {}
    events = {
        new.idempotency_key: MemoryEvent.of_statement(
            tenant_id=principal.tenant_id, event_id=uuid.uuid4(), idempotency_key=new.idempotency_key,
            request_sha256=digest, kind=new.kind.value, user_id=principal.user_id, agent_id=principal.agent_id,
            session_id=new.session_id, sequence_no=None, payload=new.payload, occurred_at=new.occurred_at)
        for new, digest in items
    }
    rows = list(events.values())
    done = session.execute(INSERT_EVENTS, {
        "tenant_id": principal.tenant_id, "user_id": principal.user_id, "agent_id": principal.agent_id,
        **{name: [getattr(event, name) for event in rows]
           for name in ("event_id", "idempotency_key", "request_sha256", "kind", "session_id", "occurred_at")},
        "payload": [Jsonb(event.payload) for event in rows],
    })
    by_id = {event.event_id: event for event in rows}
    inserted: dict[str, MemoryEvent] = {}
    for event_id, stored_at, revision in done:
        event = by_id[event_id]
        event.stored_at, event.revision = stored_at, revision
        inserted[event.idempotency_key] = event
    return inserted
