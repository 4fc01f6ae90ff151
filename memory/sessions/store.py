"""Sessions and their messages in the store: open a session, append messages, read a stage back.

A message is a ``memory_events`` row (MESSAGE, or TOOL_RESULT for a ``tool`` message) with the session's
next ``sequence_no``, handed out under the session's row lock, so numbers never repeat or skip. A batch is
one transaction: either every message is stored (or recognised as a replay) or none is.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, SQLColumnExpression, Text, and_, cast, exists, func, or_, select
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Session

from memory.enums import Category, EventKind, Space, Status
from memory.epochs import guard_write
from memory.errors import Conflict, IdempotencyConflict, InvalidInput, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import Memory, MemoryEvent, Tombstone
from memory.sessions.messages import MessageRole, StageMessage, ToolCall
from memory.sessions.models import ChatSession, SessionLink
from memory.sessions.window import ProfileEntry
from memory.skills.executions import SkillExecution, verified
from memory.store.batches import MAX_BATCH_ITEMS
from memory.store.events import insert_once, next_revision
from memory.store.visibility import not_tombstoned, visible_to

WINDOW_LOOKBACK = 2_000
"""The window and the state read the session's newest messages only: older turns reach the model through the
summary, and a request stays bounded however long the session grew."""
PROFILE_SNAPSHOT_LIMIT = 50
"""Profile and preference memories injected at session start, newest first."""


class SessionDeleted(Conflict):
    code = "session_deleted"


@dataclass(frozen=True)
class NewSession:
    session_id: str
    project_id: str | None = None
    task_id: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class NewMessage:
    idempotency_key: str
    role: MessageRole
    content: str
    created_at: datetime
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    context_refs: tuple[str, ...] = ()
    skill_execution: SkillExecution | None = None

    def payload(self) -> dict[str, Any]:
        stored: dict[str, Any] = {
            "role": self.role.value,
            "content": self.content,
            "tool_calls": [{"call_id": c.call_id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "tool_call_id": self.tool_call_id,
            "context_refs": list(self.context_refs),
        }
        if self.skill_execution is not None:
            stored["skill_execution"] = self.skill_execution.to_json()
        return stored


@dataclass(frozen=True)
class StoredMessage:
    event_id: uuid.UUID
    sequence_no: int
    replayed: bool
    message: NewMessage

    def as_stage_message(self) -> StageMessage:
        m = self.message
        return StageMessage(str(self.event_id), self.sequence_no, m.role, m.content, m.created_at, m.tool_calls,
                            m.tool_call_id, m.context_refs, m.skill_execution)


def _tombstoned(principal: PrincipalContext, session_id: str | SQLColumnExpression[str]) -> Any:
    """A deletion of the caller's session or of the caller covers the session (from then on its id is gone).
    Only the owner's own tombstone counts: one of another user's session of that id covers nothing of theirs."""
    return exists().where(
        Tombstone.tenant_id == principal.tenant_id,
        Tombstone.owner_user_id == principal.user_id,
        or_(
            and_(Tombstone.target_type == "session", Tombstone.target_id == session_id),
            and_(Tombstone.target_type == "subject", Tombstone.target_id == principal.user_id,
                 Tombstone.revision >= ChatSession.revision),
        ),
    )


def session_tombstone(tenant_id: str, owner: str, session_id: str) -> ColumnElement[bool]:
    """A deletion of ``owner``'s session ``session_id`` (a tombstone row of it)."""
    return and_(Tombstone.tenant_id == tenant_id, Tombstone.target_type == "session",
                Tombstone.target_id == session_id, Tombstone.owner_user_id == owner)


def own_sessions(principal: PrincipalContext) -> ColumnElement[bool]:
    """The sessions the caller may read: their own with their key's agent, not purged, under no deletion barrier."""
    return and_(
        ChatSession.tenant_id == principal.tenant_id,
        ChatSession.user_id == principal.user_id,
        ChatSession.agent_id.is_not_distinct_from(principal.agent_id),  # a session is one user's with one agent
        ChatSession.purged_at.is_(None),
        ~_tombstoned(principal, ChatSession.session_id),
    )


def get_session(session: Session, principal: PrincipalContext, session_id: str, *, lock: bool = False) -> ChatSession:
    """The caller's own session, else :class:`NotFound` (another user's is indistinguishable from none)."""
    statement = select(ChatSession).where(own_sessions(principal), ChatSession.session_id == session_id)
    if lock:
        statement = statement.with_for_update()
    found = session.execute(statement).scalar_one_or_none()
    if found is None:
        raise missing_session(session_id)
    return found


def missing_session(session_id: str) -> NotFound:
    """The one 404 for a session that is not there, whoever's it is or was (reads and deletion scopes alike)."""
    return NotFound(f"session {session_id!r} not found")


def _profile_snapshot(session: Session, principal: PrincipalContext) -> list[dict[str, Any]]:
    """Refs to the caller's current profile and preference memories (seed 002: injected, not a history hit)."""
    rows = session.execute(
        select(Memory)
        .where(
            visible_to(principal),
            not_tombstoned(),
            Memory.space == Space.USER.value,
            Memory.owner_id == principal.user_id,
            Memory.status == Status.ACTIVE.value,
            Memory.category.in_([Category.PROFILE.value, Category.PREFERENCE.value]),
        )
        .order_by(Memory.captured_at.desc(), Memory.memory_id)
        .limit(PROFILE_SNAPSHOT_LIMIT)
    ).scalars()
    return [
        {"memory_id": str(m.memory_id), "version": m.version, "source_id": m.source_id,
         "captured_at": m.captured_at.isoformat()}
        for m in rows
    ]


def _existing(session: Session, principal: PrincipalContext, new: NewSession, digest: str) -> ChatSession | None:
    """The session this id names already, if any: a replay of the same request, or a 409 saying why not."""
    existing = session.execute(
        select(ChatSession).where(  # session ids are each user's own (0023): nobody else's is ever found here
            ChatSession.tenant_id == principal.tenant_id, ChatSession.user_id == principal.user_id,
            ChatSession.session_id == new.session_id,
        )
    ).scalar_one_or_none()
    if existing is None:
        tombstone = session_tombstone(principal.tenant_id, principal.user_id, new.session_id)
        if session.execute(select(exists().where(tombstone))).scalar():  # deleted as a label of events or memories
            raise SessionDeleted(f"session {new.session_id!r} was deleted; start a new session with a new id")
        return None
    if existing.agent_id != principal.agent_id:  # the same user's session with another of their agents
        raise IdempotencyConflict(f"session id {new.session_id!r} is already taken; use a new id")
    if existing.purged_at is not None or session.execute(select(_tombstoned(principal, new.session_id))).scalar():
        raise SessionDeleted(f"session {new.session_id!r} was deleted; start a new session with a new id")
    if existing.request_sha256 != digest:
        raise IdempotencyConflict(
            f"session {new.session_id!r} already exists with other settings; use a new session id"
        )
    return existing


def open_session(
    session: Session, principal: PrincipalContext, new: NewSession, digest: str
) -> tuple[ChatSession, bool]:
    """Create the caller's session, or return it when this is a replay of the same request.

    Returns ``(row, created)``. The same id with another body, or someone else's id, is a 409; two requests
    opening one id at once are one creation and one replay."""
    existing = _existing(session, principal, new, digest)
    if existing is not None:
        return existing, False
    guard_write(session, principal.tenant_id, principal.user_id, None)
    created = session.execute(
        insert(ChatSession)
        .values(
            tenant_id=principal.tenant_id,
            session_id=new.session_id,
            user_id=principal.user_id,
            agent_id=principal.agent_id,
            project_id=new.project_id,
            task_id=new.task_id,
            title=new.title,
            status="active",
            request_sha256=digest,
            profile_snapshot=_profile_snapshot(session, principal),
            next_sequence=1,
            committed_through=0,
            revision=next_revision(session),
        )
        .on_conflict_do_nothing(index_elements=["tenant_id", "user_id", "session_id"])
        .returning(ChatSession.session_id)
    ).scalar_one_or_none()
    if created is None:  # another request created it since our check: that one decides
        raced = _existing(session, principal, new, digest)
        assert raced is not None
        return raced, False
    return get_session(session, principal, new.session_id), True


def _call_was_made(session: Session, chat: ChatSession, call_id: str) -> bool:
    return bool(session.execute(
        select(exists().where(
            MemoryEvent.tenant_id == chat.tenant_id,
            MemoryEvent.user_id == chat.user_id,
            MemoryEvent.session_id == chat.session_id,
            MemoryEvent.sequence_no.isnot(None),
            MemoryEvent.payload["tool_calls"].op("@>")(cast([{"call_id": call_id}], JSONB)),
        ))
    ).scalar())


def append_messages(
    session: Session, principal: PrincipalContext, session_id: str, messages: Sequence[NewMessage],
    digests: Sequence[str],
) -> list[StoredMessage]:
    """Store up to :data:`MAX_BATCH_ITEMS` messages, in order, in the caller's transaction.

    A message whose idempotency key was stored before with the same body is a replay (its first result);
    another body, or the key used elsewhere, is a 409 for the whole batch. A ``tool`` message must answer a
    call made by an earlier message of the session (or of this batch): else a 422, and nothing is stored.
    """
    if not 1 <= len(messages) <= MAX_BATCH_ITEMS:
        raise InvalidInput(f"send 1 to {MAX_BATCH_ITEMS} messages per request", code="batch_size")
    chat = get_session(session, principal, session_id, lock=True)
    guard_write(session, principal.tenant_id, principal.user_id, None)
    calls_in_batch: set[str] = set()
    stored: list[StoredMessage] = []
    for position, (message, digest) in enumerate(zip(messages, digests, strict=True)):
        replay = _replay_of(session, principal, chat, message, digest, position)
        if replay is not None:
            stored.append(replay)
            calls_in_batch.update(c.call_id for c in message.tool_calls)
            continue
        if message.role is MessageRole.TOOL:
            if message.tool_call_id is None:
                raise InvalidInput(f"messages[{position}]: a tool message needs tool_call_id",
                                   code="tool_call_id_required")
            if message.tool_call_id not in calls_in_batch and not _call_was_made(session, chat, message.tool_call_id):
                raise InvalidInput(
                    f"messages[{position}]: tool_call_id {message.tool_call_id!r} names no earlier tool call of "
                    "this session; send the assistant message with that call first",
                    code="unknown_tool_call",
                )
        elif message.tool_call_id is not None:
            raise InvalidInput(f"messages[{position}]: only a tool message has a tool_call_id",
                               code="tool_call_id_not_allowed")
        if message.skill_execution is not None:
            message = _with_verified_report(session, principal, message, position)
        calls_in_batch.update(c.call_id for c in message.tool_calls)
        # Another request may store this key after our check (keys are unique per user): its answer decides.
        inserted = insert_once(
            session, principal, idempotency_key=message.idempotency_key, digest=digest,
            kind=EventKind.TOOL_RESULT if message.role is MessageRole.TOOL else EventKind.MESSAGE,
            payload=message.payload(), occurred_at=message.created_at, session_id=chat.session_id,
            sequence_no=chat.next_sequence,
        )
        if inserted is None:
            raced = _replay_of(session, principal, chat, message, digest, position)
            assert raced is not None  # the conflicting row is committed: the statement waited for it
            stored.append(raced)
            continue
        stored.append(StoredMessage(inserted, chat.next_sequence, replayed=False, message=message))
        chat.next_sequence += 1
    if any(not s.replayed for s in stored):
        chat.last_message_at = func.now()
        chat.writer_roles = sorted(principal.roles)
    session.flush()
    return stored


REPORTERS = frozenset({MessageRole.ASSISTANT, MessageRole.TOOL})
"""Who may report a skill run: the agent's side of the conversation (a user or a system prompt ran none)."""


def _with_verified_report(
    session: Session, principal: PrincipalContext, message: NewMessage, position: int
) -> NewMessage:
    """The message with its skill execution report checked and its resolved layers recorded."""
    assert message.skill_execution is not None
    field = f"messages[{position}].skill_execution"
    if message.role not in REPORTERS:
        raise InvalidInput(f"{field}: only an assistant or tool message reports a skill execution, not a "
                           f"{message.role.value} message", code="skill_execution_role", details={"field": field})
    return replace(message, skill_execution=verified(session, principal, message.skill_execution, field))


def _replay_of(
    session: Session, principal: PrincipalContext, chat: ChatSession, message: NewMessage, digest: str, position: int,
) -> StoredMessage | None:
    existing = session.execute(
        select(MemoryEvent).where(
            MemoryEvent.tenant_id == principal.tenant_id, MemoryEvent.user_id == principal.user_id,
            MemoryEvent.idempotency_key == message.idempotency_key,
        )
    ).scalar_one_or_none()
    if existing is None:
        return None
    if existing.session_id != chat.session_id or existing.sequence_no is None:  # the caller's key, used elsewhere
        raise IdempotencyConflict(
            f"messages[{position}]: idempotency key {message.idempotency_key!r} is already taken; use a new key"
        )
    if existing.request_sha256 != digest:
        raise IdempotencyConflict(
            f"messages[{position}]: idempotency key {message.idempotency_key!r} was already used with another "
            "message; use a new key for a new message",
            details={"event_id": str(existing.event_id), "sequence_no": existing.sequence_no},
        )
    return StoredMessage(existing.event_id, existing.sequence_no, replayed=True, message=message)


def _as_stage_message(event: MemoryEvent) -> StageMessage:
    payload = event.payload
    assert event.sequence_no is not None
    return StageMessage(
        event_id=str(event.event_id),
        sequence_no=event.sequence_no,
        role=MessageRole(payload["role"]),
        content=payload["content"],
        created_at=event.occurred_at,
        tool_calls=tuple(ToolCall(c["call_id"], c["name"], c["arguments"]) for c in payload.get("tool_calls") or ()),
        tool_call_id=payload.get("tool_call_id"),
        context_refs=tuple(payload.get("context_refs") or ()),
        skill_execution=SkillExecution.of_json(payload["skill_execution"]) if payload.get("skill_execution") else None,
    )


def message_live() -> ColumnElement[bool]:
    """An event neither scrubbed nor under a deletion's barrier (which hides it at once; the purge scrubs it)."""
    return and_(
        MemoryEvent.purged_at.is_(None),
        ~exists().where(Tombstone.tenant_id == MemoryEvent.tenant_id, Tombstone.target_type == "event",
                        Tombstone.target_id == cast(MemoryEvent.event_id, Text)),
    )


def stage_messages(
    session: Session, chat: ChatSession, from_sequence: int = 1, to_sequence: int | None = None,
) -> tuple[StageMessage, ...]:
    """The session's messages in ``[from_sequence, to_sequence]``, in order; deleted (scrubbed) ones left out."""
    statement = (
        select(MemoryEvent)
        .where(
            MemoryEvent.tenant_id == chat.tenant_id,
            MemoryEvent.user_id == chat.user_id,
            MemoryEvent.session_id == chat.session_id,
            MemoryEvent.sequence_no >= from_sequence,
            message_live(),
        )
        .order_by(MemoryEvent.sequence_no)
    )
    if to_sequence is not None:
        statement = statement.where(MemoryEvent.sequence_no <= to_sequence)
    return tuple(_as_stage_message(e) for e in session.execute(statement).scalars())


def current_profile(session: Session, principal: PrincipalContext, chat: ChatSession) -> list[ProfileEntry]:
    """The profile injected at session start, re-read now: a deleted memory is gone, a corrected one current."""
    ids = [uuid.UUID(entry["memory_id"]) for entry in chat.profile_snapshot]
    if not ids:
        return []
    rows = session.execute(
        select(Memory).where(visible_to(principal), not_tombstoned(), Memory.memory_id.in_(ids),
                             Memory.status == Status.ACTIVE.value)
    ).scalars()
    by_id = {row.memory_id: row for row in rows}
    return [
        ProfileEntry(str(m.memory_id), m.version, Category(m.category), m.key, m.content, m.source_id, m.captured_at)
        for m in (by_id.get(memory_id) for memory_id in ids) if m is not None
    ]


def answered_only(messages: Sequence[StageMessage]) -> tuple[StageMessage, ...]:
    """Leave out tool results whose call was deleted: a result never stands without its call."""
    calls = {call.call_id for m in messages for call in m.tool_calls}
    return tuple(m for m in messages if m.role is not MessageRole.TOOL or m.tool_call_id in calls)


def links_of(session: Session, chat: ChatSession) -> list[dict[str, Any]]:
    """What the session used and produced (seed 004 §8.3 step 4), oldest first."""
    rows = session.execute(
        select(SessionLink).where(SessionLink.tenant_id == chat.tenant_id, SessionLink.user_id == chat.user_id,
                                  SessionLink.session_id == chat.session_id)
        .order_by(SessionLink.created_at, SessionLink.target)
    ).scalars()
    return [{"target": row.target, "relation": row.relation, "commit_id": row.commit_id} for row in rows]
