"""Whose a deletion's target and its request id are (issue 23, "ids are owned").

A deletion may name only what exists and is its subject's: a session or subject that is not there is the
same 404 as any missing object, so a scope can neither hide another user's data nor pre-claim an id nobody
used yet, nor tell one case from the other. (Memories, events and records are looked up, owner included, by
:func:`memory.deletion.barrier.resolve_scope`.) Request ids live in the requester's namespace, and the ids
mnemo picks when a ``DELETE`` names none are keyed by a per-tenant secret (:mod:`memory.identity.ids`).
"""

from __future__ import annotations

from sqlalchemy import exists, or_, select
from sqlalchemy.orm import Session

from memory.deletion.scope import PERSONAL_SPACES, Scope, ScopeType
from memory.enums import Status
from memory.errors import NotFound
from memory.models import Memory, MemoryEvent, Principal, Tombstone
from memory.sessions.models import ChatSession
from memory.sessions.store import missing_session, session_tombstone


def session_exists(session: Session, tenant_id: str, owner: str, session_id: str) -> bool:
    """``owner`` has something under ``session_id`` no deletion covers yet: an open session, a live event or a
    live personal memory labelled with it (events and memories name a session without opening one)."""
    tombstoned = session_tombstone(tenant_id, owner, session_id)
    opened = exists().where(
        ChatSession.tenant_id == tenant_id, ChatSession.user_id == owner, ChatSession.session_id == session_id,
        ChatSession.purged_at.is_(None), ~exists().where(tombstoned),
    )
    event = exists().where(
        MemoryEvent.tenant_id == tenant_id, MemoryEvent.user_id == owner, MemoryEvent.session_id == session_id,
        MemoryEvent.purged_at.is_(None),
        ~exists().where(tombstoned, Tombstone.revision >= MemoryEvent.revision),
    )
    memory = exists().where(
        Memory.tenant_id == tenant_id, Memory.owner_id == owner, Memory.session_id == session_id,
        Memory.space.in_(PERSONAL_SPACES),
        Memory.status.notin_([Status.DELETED.value, Status.SUPERSEDED.value]),
    )
    return bool(session.execute(select(or_(opened, event, memory))).scalar())


def subject_exists(session: Session, tenant_id: str, user_id: str) -> bool:
    """A user is known to the tenant once a key was made for them (``principals``)."""
    return bool(session.execute(select(exists().where(
        Principal.tenant_id == tenant_id, Principal.user_id == user_id
    ))).scalar())


def require_target(session: Session, tenant_id: str, scope: Scope) -> None:
    """The 404 of a missing object unless the scope names something of its subject's; it runs before the barrier
    writes anything, inside its transaction, so a refused request leaves no row and starts no workflow."""
    if scope.type is ScopeType.SESSION and not session_exists(session, tenant_id, scope.subject, scope.target_id):
        raise missing_session(scope.target_id)
    if scope.type is ScopeType.SUBJECT and not subject_exists(session, tenant_id, scope.subject):
        raise NotFound(f"user {scope.subject!r} not found")


__all__ = ["require_target", "session_exists", "subject_exists"]
