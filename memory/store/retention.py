"""Retention: holds that block purges, and per-category keep periods (no "forever" default)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.orm import QueryableAttribute, Session

from memory.enums import Role, Status
from memory.errors import Forbidden, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry, DeletionJob, Memory, MemoryEvent, RetentionHold, RetentionPolicy

DEFAULT_KEEP_DAYS: dict[str, int] = {
    "CANDIDATE": 30,  # unconfirmed candidates: reviewed briefly, then gone
    "EVENT": 180,  # source events: kept for troubleshooting, then purged
    "EXPIRED": 90,  # expired memories no longer count; keep a while for audit
    "ACTIVE": 365,  # unconfirmed this long, an active memory expires: it must be revalidated to count
}
"""Product defaults, overridable per tenant in ``retention_policies``. Knowledge is revalidated, not kept forever."""


def _require_admin(principal: PrincipalContext) -> None:
    if not principal.has(Role.ADMIN):
        raise Forbidden("retention holds need the admin role")


def create_hold(session: Session, principal: PrincipalContext, user_id: str, reason: str) -> RetentionHold:
    _require_admin(principal)
    hold = RetentionHold(
        tenant_id=principal.tenant_id,
        hold_id=uuid.uuid4(),
        user_id=user_id,
        reason=reason,
        created_by=principal.user_id,
    )
    session.add(hold)
    session.flush()
    session.refresh(hold)
    _audit_hold(session, principal, hold, "RETENTION_HOLD_CREATED")
    return hold


def _audit_hold(session: Session, principal: PrincipalContext, hold: RetentionHold, action: str) -> None:
    """Holds are admin actions and are audited like keys and policies: who, which hold, on whom, why."""
    session.add(
        AuditEntry(
            tenant_id=principal.tenant_id, actor=principal.user_id, action=action,
            detail={"hold_id": str(hold.hold_id), "user_id": hold.user_id, "reason": hold.reason,
                    "key_id": principal.key_id},
        )
    )
    session.flush()


def release_hold(session: Session, principal: PrincipalContext, hold_id: uuid.UUID) -> RetentionHold:
    _require_admin(principal)
    hold = session.execute(
        select(RetentionHold)
        .where(RetentionHold.tenant_id == principal.tenant_id, RetentionHold.hold_id == hold_id)
        .with_for_update()
    ).scalar_one_or_none()
    if hold is None:
        raise NotFound(f"retention hold {hold_id} does not exist")
    if hold.released_at is None:
        hold.released_at = func.now()
        session.flush()
        session.refresh(hold)
        # Only the release that lifts the hold is an action; repeating it changes nothing and is not audited again.
        _audit_hold(session, principal, hold, "RETENTION_HOLD_RELEASED")
    return hold


def blocked_jobs(session: Session, tenant_id: str, user_id: str) -> list[DeletionJob]:
    return list(
        session.execute(
            select(DeletionJob).where(
                DeletionJob.tenant_id == tenant_id,
                DeletionJob.subject_user_id == user_id,
                DeletionJob.status == "blocked_by_retention",
            )
        ).scalars()
    )


def keep_days(session: Session, tenant_id: str) -> dict[str, int]:
    """The tenant's effective keep periods: product defaults overridden by its own policies."""
    overrides = session.execute(
        select(RetentionPolicy.target, RetentionPolicy.keep_days).where(RetentionPolicy.tenant_id == tenant_id)
    ).all()
    return {**DEFAULT_KEEP_DAYS, **{row.target: row.keep_days for row in overrides}}


def _older_than(
    column: ColumnElement[datetime] | QueryableAttribute[datetime], now: datetime, days: int
) -> ColumnElement[bool]:
    return column < now - func.make_interval(0, 0, 0, days)


def due_memories(session: Session, tenant_id: str, now: datetime, limit: int) -> list[uuid.UUID]:
    """Memories past their keep period. Age counts from storage or last confirmation, never from
    being recalled: recall does not extend retention."""
    days = keep_days(session, tenant_id)
    age = func.coalesce(Memory.last_confirmed_at, Memory.stored_at)
    due = or_(
        and_(Memory.status == Status.CANDIDATE.value, _older_than(age, now, days["CANDIDATE"])),
        # An expired memory ages from the moment it expired, not from when it was stored.
        and_(
            Memory.status == Status.EXPIRED.value,
            _older_than(func.coalesce(Memory.expires_at, Memory.stored_at), now, days["EXPIRED"]),
        ),
    )
    return list(
        session.execute(
            select(Memory.memory_id).where(Memory.tenant_id == tenant_id, due).order_by(Memory.memory_id).limit(limit)
        ).scalars()
    )


def expire_unconfirmed(session: Session, tenant_id: str, now: datetime, limit: int) -> int:
    """Active memories nobody confirmed within the keep period expire (then age out as EXPIRED)."""
    days = keep_days(session, tenant_id)["ACTIVE"]
    stale = (
        select(Memory.memory_id)
        .where(
            Memory.tenant_id == tenant_id,
            Memory.status == Status.ACTIVE.value,
            _older_than(func.coalesce(Memory.last_confirmed_at, Memory.stored_at), now, days),
        )
        .limit(limit)
        .scalar_subquery()
    )
    expired = session.execute(
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.status == Status.ACTIVE.value, Memory.memory_id.in_(stale))
        .values(status=Status.EXPIRED.value, expires_at=now)
        .returning(Memory.memory_id, Memory.version)
    ).all()
    for memory_id, version in expired:
        session.add(
            AuditEntry(
                tenant_id=tenant_id, actor="retention", action="MEMORY_EXPIRED_UNCONFIRMED",
                memory_id=memory_id, version=version, detail={"keep_days": days},
            )
        )
    return len(expired)


def due_events(session: Session, tenant_id: str, now: datetime, limit: int) -> list[uuid.UUID]:
    days = keep_days(session, tenant_id)["EVENT"]
    return list(
        session.execute(
            select(MemoryEvent.event_id)
            .where(
                MemoryEvent.tenant_id == tenant_id,
                MemoryEvent.purged_at.is_(None),
                _older_than(MemoryEvent.stored_at, now, days),
            )
            .order_by(MemoryEvent.event_id)
            .limit(limit)
        ).scalars()
    )
