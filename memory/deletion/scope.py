"""What a deletion request covers: a memory, an event, a session, a source record, or a whole subject."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import ColumnElement, and_, false, select
from sqlalchemy.orm import Session

from memory.enums import Space
from memory.models import DeletionJob, Memory, MemoryEvent


class ScopeType(StrEnum):
    MEMORY = "memory"
    EVENT = "event"
    SESSION = "session"
    SUBJECT = "subject"
    RECORD = "record"
    """One source record of its owner's, named ``resource:record_id`` (memory.deletion.record_layer purges it)."""


@dataclass(frozen=True)
class Scope:
    """A resolved scope: its type, target id and the subject (user) whose epoch it bumps."""

    type: ScopeType
    target_id: str
    subject: str

    def as_json(self) -> dict[str, str]:
        key = {ScopeType.MEMORY: "memory_id", ScopeType.EVENT: "event_id", ScopeType.SESSION: "session_id"}
        if self.type is ScopeType.SUBJECT:
            return {"type": self.type.value, "user_id": self.subject}
        if self.type is ScopeType.RECORD:
            return {"type": self.type.value, "record": self.target_id, "user_id": self.subject}
        return {"type": self.type.value, key[self.type]: self.target_id, "user_id": self.subject}


PERSONAL_SPACES = (Space.USER.value, Space.SESSION.value)


def memories_in(scope: Scope, tenant_id: str, up_to_revision: int) -> ColumnElement[bool]:
    """Memory rows (every version) the scope covers, written at or before the barrier's revision."""
    if scope.type is ScopeType.MEMORY:
        return and_(Memory.tenant_id == tenant_id, Memory.memory_id == uuid.UUID(scope.target_id))
    personal = and_(
        Memory.tenant_id == tenant_id,
        Memory.owner_id == scope.subject,
        Memory.space.in_(PERSONAL_SPACES),
        Memory.revision <= up_to_revision,
    )
    if scope.type is ScopeType.SESSION:
        # NULL-safe: a memory extracted by a commit has no session_id; it is found through its evidence
        # links (:func:`linked_refs`), and this condition must stay false for it, never unknown (negated,
        # unknown stays unknown and dropped those memories from the purge: issue 23, finding 1).
        return and_(personal, Memory.session_id.is_not_distinct_from(scope.target_id))
    if scope.type is ScopeType.SUBJECT:
        return personal
    return false()  # an event's derived memories are found through their evidence links


def events_in(scope: Scope, tenant_id: str, up_to_revision: int) -> ColumnElement[bool]:
    """Source events the scope covers (a single memory's scope covers none: they get markers)."""
    if scope.type is ScopeType.EVENT:
        return and_(MemoryEvent.tenant_id == tenant_id, MemoryEvent.event_id == uuid.UUID(scope.target_id))
    mine = and_(
        MemoryEvent.tenant_id == tenant_id,
        MemoryEvent.user_id == scope.subject,
        MemoryEvent.revision <= up_to_revision,
    )
    if scope.type is ScopeType.SESSION:
        return and_(mine, MemoryEvent.session_id == scope.target_id)
    if scope.type is ScopeType.SUBJECT:
        return mine
    return false()


def evidence_link(kind: str, target: uuid.UUID | str) -> str:
    """How ``evidence_refs`` name another mnemo record: ``memory:<id>`` or ``event:<id>``."""
    return f"{kind}:{target}"


def linked_refs(session: Session, scope: Scope, tenant_id: str, up_to_revision: int) -> list[str]:
    """The evidence links that point into the scope (for finding memories derived from it)."""
    memory_ids = session.execute(
        select(Memory.memory_id).where(memories_in(scope, tenant_id, up_to_revision)).distinct()
    ).scalars()
    event_ids = session.execute(
        select(MemoryEvent.event_id).where(events_in(scope, tenant_id, up_to_revision))
    ).scalars()
    return [evidence_link("memory", m) for m in memory_ids] + [evidence_link("event", e) for e in event_ids]


def scope_of(job: DeletionJob) -> Scope:
    """The scope a job was requested with, read back from its row."""
    scope_type = ScopeType(job.scope_type)
    target = {
        ScopeType.MEMORY: job.scope.get("memory_id"),
        ScopeType.EVENT: job.scope.get("event_id"),
        ScopeType.SESSION: job.scope.get("session_id"),
        ScopeType.SUBJECT: job.subject_user_id,
        ScopeType.RECORD: job.scope.get("record"),
    }[scope_type]
    return Scope(scope_type, str(target), job.subject_user_id)


__all__ = [
    "PERSONAL_SPACES", "Scope", "ScopeType", "events_in", "evidence_link", "linked_refs", "memories_in", "scope_of",
]
