"""Re-apply tombstones after a restore, so an old backup cannot bring deleted data back."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import cast, func, select, update
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Session

from memory.db import affected_rows
from memory.deletion.layers import scrubbed_columns
from memory.deletion.scope import Scope, ScopeType, events_in, memories_in
from memory.models import Memory, MemoryEvent, Tombstone
from memory.projection import delete_projection


@dataclass(frozen=True)
class TombstoneRecord:
    """A tombstone carried from the live database into a restored one."""

    target_type: str
    target_id: str
    owner_user_id: str
    job_id: str
    revision: int


def export_tombstones(session: Session, tenant_id: str) -> list[TombstoneRecord]:
    rows = session.execute(select(Tombstone).where(Tombstone.tenant_id == tenant_id)).scalars()
    return [TombstoneRecord(t.target_type, t.target_id, t.owner_user_id, str(t.job_id), t.revision) for t in rows]


def reapply(session: Session, tenant_id: str, tombstones: list[TombstoneRecord]) -> int:
    """Insert the tombstones and scrub everything they cover: content, projection, events. Returns rows scrubbed."""
    scrubbed = 0
    for tomb in tombstones:
        session.execute(
            insert(Tombstone)
            .values(
                tenant_id=tenant_id,
                target_type=tomb.target_type,
                target_id=tomb.target_id,
                owner_user_id=tomb.owner_user_id,
                job_id=tomb.job_id,
                revision=tomb.revision,
            )
            .on_conflict_do_nothing()
        )
        scope = Scope(ScopeType(tomb.target_type), tomb.target_id, tomb.owner_user_id)
        covered = memories_in(scope, tenant_id, tomb.revision)
        delete_projection(session, tenant_id, select(Memory.memory_id).where(covered))
        scrubbed += affected_rows(session.execute(
            update(Memory)
            .where(covered, Memory.purged_at.is_(None))
            .values(**scrubbed_columns())
        ))
        scrubbed += affected_rows(session.execute(
            update(MemoryEvent)
            .where(events_in(scope, tenant_id, tomb.revision), MemoryEvent.purged_at.is_(None))
            .values(payload=cast({}, JSONB), purged_at=func.now())
        ))
    return scrubbed
