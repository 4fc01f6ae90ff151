"""Commits that start by policy: enough pending messages, enough pending tokens, or a session gone idle.

An agent that never calls ``commit`` still has its conversations learned from. The thresholds are
settings (``MNEMO_SESSION_COMMIT_AFTER_MESSAGES`` / ``_AFTER_TOKENS`` / ``_IDLE_SECONDS``; 0 turns one off).
A policy commit is an ordinary commit with the id ``auto-<from>-<to>`` (accepted under the session's row lock,
like every commit), and it writes with the roles of the key that last posted messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, exists, func, or_, select
from sqlalchemy.orm import Session

from memory.identity.auth import PrincipalContext
from memory.models import MemoryEvent
from memory.sessions.commits import Accepted, CommitStatus, accept_commit, owner_of
from memory.sessions.models import ChatSession, SessionCommit
from memory.tokens import count_tokens


@dataclass(frozen=True)
class CommitPolicy:
    after_messages: int = 50
    after_tokens: int = 8_000
    idle_seconds: float = 1_800.0

    def volume_trigger(self, pending_messages: int, pending_tokens: int) -> str | None:
        if self.after_messages and pending_messages >= self.after_messages:
            return "policy:messages"
        if self.after_tokens and pending_tokens >= self.after_tokens:
            return "policy:tokens"
        return None


AUTO_PREFIX = "auto-"
"""Commit ids of policy commits; a client's commit id may not start with it."""


def auto_commit_id(chat: ChatSession) -> str:
    return f"{AUTO_PREFIX}{chat.committed_through + 1}-{chat.next_sequence - 1}"


def _writer(chat: ChatSession) -> PrincipalContext:
    return owner_of(chat, chat.writer_roles, "session-commit-policy")


def pending_tokens(session: Session, chat: ChatSession) -> int:
    contents = session.execute(
        select(MemoryEvent.payload["content"].astext).where(
            MemoryEvent.tenant_id == chat.tenant_id, MemoryEvent.user_id == chat.user_id,
            MemoryEvent.session_id == chat.session_id,
            MemoryEvent.sequence_no > chat.committed_through, MemoryEvent.purged_at.is_(None),
        )
    ).scalars()
    return sum(count_tokens(content or "") for content in contents)


def commit_if_due(session: Session, chat: ChatSession, policy: CommitPolicy) -> Accepted | None:
    """After messages were stored: a commit of the pending stage if it reached a volume threshold."""
    pending = chat.next_sequence - 1 - chat.committed_through
    if pending <= 0:
        return None
    trigger = policy.volume_trigger(pending, pending_tokens(session, chat) if policy.after_tokens else 0)
    if trigger is None:
        return None
    return accept_commit(session, _writer(chat), chat.session_id, auto_commit_id(chat), trigger=trigger)


def _tried() -> ColumnElement[bool]:
    """This stage's policy commit exists already (it failed and gave the stage back): a new message makes a
    new stage and a new try; until then the session is not swept again, nor does it take others' turns.
    Correlated to the session row alone: nested in a listing over tenants, a condition on the tenant column
    would pull the tenants table into this subquery."""
    return exists().where(
        SessionCommit.tenant_id == ChatSession.tenant_id, SessionCommit.user_id == ChatSession.user_id,
        SessionCommit.session_id == ChatSession.session_id,
        SessionCommit.commit_id == func.concat(AUTO_PREFIX, ChatSession.committed_through + 1, "-",
                                               ChatSession.next_sequence - 1),
    )


def _idle(tenant_id: str | ColumnElement[str], policy: CommitPolicy, now: datetime) -> tuple[ColumnElement[bool], ...]:
    """A session of ``tenant_id`` with uncommitted messages and no new message for ``policy.idle_seconds``."""
    return (ChatSession.tenant_id == tenant_id, ChatSession.purged_at.is_(None),
            ChatSession.next_sequence - 1 > ChatSession.committed_through,
            ChatSession.last_message_at < now - timedelta(seconds=policy.idle_seconds), ~_tried())


def commit_idle(
    session: Session, tenant_id: str, policy: CommitPolicy, now: datetime, limit: int = 100
) -> list[Accepted]:
    """Commits of sessions with uncommitted messages and no new message for ``policy.idle_seconds``."""
    if not policy.idle_seconds:
        return []
    idle = session.execute(
        select(ChatSession)
        .where(*_idle(tenant_id, policy, now))
        .order_by(ChatSession.last_message_at)
        .limit(limit)
    ).scalars().all()
    return [accept_commit(session, _writer(chat), chat.session_id, auto_commit_id(chat), trigger="policy:idle")
            for chat in idle]


STALLED_AFTER = timedelta(minutes=1)
"""An accepted commit whose workflow has not moved it for this long may never have been started (Temporal was
down when it was accepted): the sweep starts it, under its own id, so a running one is left alone."""


def _to_start(tenant_id: str | ColumnElement[str], now: datetime) -> tuple[ColumnElement[bool], ...]:
    """An accepted commit of ``tenant_id`` whose workflow the sweep starts: an idle one it just accepted, or
    one no workflow has moved for :data:`STALLED_AFTER`."""
    return (SessionCommit.tenant_id == tenant_id, SessionCommit.status == CommitStatus.ACCEPTED.value,
            or_(SessionCommit.trigger == "policy:idle", SessionCommit.updated_at < now - STALLED_AFTER))


def sweep_tenant(
    session: Session, tenant_id: str, policy: CommitPolicy, now: datetime, limit: int
) -> list[SessionCommit]:
    """Commit the tenant's idle sessions; the accepted commits whose workflows must be started (the idle ones
    just accepted, and any accepted commit no workflow has moved for :data:`STALLED_AFTER`)."""
    commit_idle(session, tenant_id, policy, now, limit)
    session.flush()
    return list(session.execute(select(SessionCommit).where(*_to_start(tenant_id, now)).limit(limit)).scalars().all())


def sweep_due(tenant_id: ColumnElement[str], policy: CommitPolicy, now: datetime) -> ColumnElement[bool]:
    """``tenant_id`` (a column, for a listing over tenants) has work for :func:`sweep_tenant`: the same rules."""
    to_start = select(SessionCommit.commit_id).where(*_to_start(tenant_id, now)).exists()
    if not policy.idle_seconds:
        return to_start
    return or_(select(ChatSession.session_id).where(*_idle(tenant_id, policy, now)).exists(), to_start)
