"""``session.commit``: accepting a commit (which stage it covers), its status machine and its read model.

The API accepts a commit in one transaction: it claims the messages after the last commit's stage up to
the newest, and records the owner's deletion epoch; the :class:`~workflows.session_commit.SessionCommitWorkflow`
(one per commit id) then archives, extracts and persists (:mod:`memory.sessions.archive`,
:mod:`memory.sessions.persist`). A replay of the commit id returns the first acceptance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memory.epochs import StaleEpoch, current_epoch, guard_write
from memory.errors import Conflict, NotFound
from memory.identity.auth import PrincipalContext
from memory.sessions.models import ChatSession, SessionCommit
from memory.sessions.store import get_session


class CommitStatus(StrEnum):
    ACCEPTED = "accepted"
    ARCHIVED = "archived"
    EXTRACTED = "extracted"
    COMPLETED = "completed"
    COMPLETED_WITH_REJECTIONS = "completed_with_rejections"
    """Something was stored, and something the extractor proposed was refused (reasons listed)."""
    FAILED_REQUIRES_ACTION = "failed_requires_action"
    """Nothing the extractor answered could be used (or it could not be reached): fix it and commit again."""
    CANCELLED_BY_DELETION = "cancelled_by_deletion"
    """The owner's data was deleted while the commit ran: nothing was written back."""


TERMINAL = frozenset({
    CommitStatus.COMPLETED, CommitStatus.COMPLETED_WITH_REJECTIONS, CommitStatus.FAILED_REQUIRES_ACTION,
    CommitStatus.CANCELLED_BY_DELETION,
})


class NothingToCommit(Conflict):
    code = "nothing_to_commit"


def owner_of(chat: ChatSession, roles: Iterable[str], key_id: str) -> PrincipalContext:
    """Who a commit writes as: the session's owner (user and agent) with the roles it was given."""
    return PrincipalContext(chat.tenant_id, chat.user_id, chat.agent_id, frozenset(roles), key_id=key_id)


def workflow_id(tenant_id: str, user_id: str, session_id: str, commit_id: str) -> str:
    """One workflow per commit id of a user's session; hashed so no id a client chooses can collide with
    another's (session and commit ids are each user's own)."""
    digest = hashlib.sha256(f"{tenant_id}\x00{user_id}\x00{session_id}\x00{commit_id}".encode()).hexdigest()[:32]
    return f"session-commit-{digest}"


@dataclass(frozen=True)
class Accepted:
    commit: SessionCommit
    replayed: bool


def accept_commit(
    session: Session, principal: PrincipalContext, session_id: str, commit_id: str, *, trigger: str = "explicit"
) -> Accepted:
    """Claim the session's uncommitted messages for ``commit_id`` (or return the commit it already names)."""
    chat = get_session(session, principal, session_id, lock=True)
    existing = session.get(SessionCommit, (principal.tenant_id, chat.user_id, session_id, commit_id))
    if existing is not None:
        return Accepted(existing, replayed=True)
    last = chat.next_sequence - 1
    if last <= chat.committed_through:
        raise NothingToCommit(
            f"session {session_id!r} has no messages after sequence {chat.committed_through} (the last commit's "
            "stage); post messages first",
            details={"committed_through": chat.committed_through},
        )
    commit = SessionCommit(
        tenant_id=principal.tenant_id,
        user_id=chat.user_id,
        session_id=session_id,
        commit_id=commit_id,
        workflow_id=workflow_id(principal.tenant_id, chat.user_id, session_id, commit_id),
        status=CommitStatus.ACCEPTED.value,
        trigger=trigger,
        requested_by=principal.user_id,
        requester_roles=sorted(principal.roles),
        held_epoch=current_epoch(session, principal.tenant_id, chat.user_id),
        from_sequence=chat.committed_through + 1,
        to_sequence=last,
    )
    chat.committed_through = last
    session.add(commit)
    session.flush()
    return Accepted(commit, replayed=False)


def read_commit(session: Session, principal: PrincipalContext, session_id: str, commit_id: str) -> SessionCommit:
    chat = get_session(session, principal, session_id)
    commit = session.get(SessionCommit, (principal.tenant_id, chat.user_id, session_id, commit_id))
    if commit is None:
        raise NotFound(f"commit {commit_id!r} of session {session_id!r} not found")
    return commit


def lock_commit(session: Session, ref: CommitRef) -> tuple[SessionCommit, ChatSession]:
    """The commit and its session, locked (the commit's steps: one writer of a commit at a time).

    ``ref.user_id`` is the session's owner; ``None`` only for a workflow started before 0023 made session ids
    per user (then the ids were unique in the tenant, and still name one commit)."""
    statement = select(SessionCommit).where(SessionCommit.tenant_id == ref.tenant_id,
                                            SessionCommit.session_id == ref.session_id,
                                            SessionCommit.commit_id == ref.commit_id)
    if ref.user_id is not None:
        statement = statement.where(SessionCommit.user_id == ref.user_id)
    commit = session.execute(statement.with_for_update()).scalar_one()
    chat = session.execute(
        select(ChatSession).where(ChatSession.tenant_id == ref.tenant_id, ChatSession.user_id == commit.user_id,
                                  ChatSession.session_id == ref.session_id)
        .with_for_update()  # one commit step of a session at a time: summaries are built in stage order
    ).scalar_one()
    return commit, chat


def release_stage(session: Session, commit: SessionCommit) -> None:
    """A commit that failed gives its stage back, so the next commit (after the fix) covers those messages
    again; unless a later commit has already claimed past it (one atomic update, racing no acceptance)."""
    session.execute(
        update(ChatSession)
        .where(ChatSession.tenant_id == commit.tenant_id, ChatSession.user_id == commit.user_id,
               ChatSession.session_id == commit.session_id, ChatSession.committed_through == commit.to_sequence)
        .values(committed_through=commit.from_sequence - 1)
    )


def move(commit: SessionCommit, to: CommitStatus, **fields: Any) -> None:
    """Set the commit's status (never out of a terminal one) and the given fields."""
    if CommitStatus(commit.status) in TERMINAL:
        raise Conflict(f"commit {commit.commit_id!r} already ended as {commit.status}", code="commit_ended")
    commit.status = to.value
    for name, value in fields.items():
        setattr(commit, name, value)
    if to in TERMINAL and "proposed" in commit.memories:  # the candidates' text was only for the persist step
        commit.memories = {k: v for k, v in commit.memories.items() if k != "proposed"}
    commit.updated_at = func.now()
    if to in TERMINAL:
        commit.completed_at = func.now()


def cancelled_by_deletion(session: Session, commit: SessionCommit, chat: ChatSession) -> bool:
    """Has the owner's data been deleted since the commit was accepted? Then it ends, writing nothing, and gives
    its stage back (the messages that remain are the next commit's). Every step that writes asks first: the
    share lock this takes on the owner's epoch keeps a deletion barrier out until the step's transaction ends."""
    try:
        guard_write(session, commit.tenant_id, chat.user_id, commit.held_epoch)
    except StaleEpoch as exc:
        release_stage(session, commit)
        move(commit, CommitStatus.CANCELLED_BY_DELETION, error=exc.message,
             reasons=[*commit.reasons, {"reason": "deleted_meanwhile", "detail": exc.message}])
        return True
    return False


@dataclass(frozen=True)
class CommitRef:
    tenant_id: str
    session_id: str
    commit_id: str
    user_id: str | None = None
    """The session's owner (session ids are each user's own); ``None`` in a workflow started before 0023."""


def ref_of(commit: SessionCommit) -> CommitRef:
    """What a commit's workflow is started with."""
    return CommitRef(commit.tenant_id, commit.session_id, commit.commit_id, commit.user_id)
