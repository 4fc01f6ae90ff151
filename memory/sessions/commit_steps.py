"""The steps of a session commit, each one transaction on the locked commit: archive, propose, persist, fail.

:class:`~workflows.session_commit.SessionCommitWorkflow` runs them as activities; every state move of a commit
after its acceptance happens here. Each step locks the commit and its session, does nothing when the commit
has moved past it (a retried activity), and, before it writes, asks :func:`cancelled_by_deletion` (the owner's
data deleted since acceptance ends the commit, writing nothing). The extractor is called between
:func:`stage_to_extract` and :func:`propose`, outside any transaction (an LLM call may take a minute).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from memory.sessions.archive import archive_stage
from memory.sessions.commits import (
    TERMINAL,
    CommitRef,
    CommitStatus,
    cancelled_by_deletion,
    lock_commit,
    move,
    release_stage,
)
from memory.sessions.messages import Stage
from memory.sessions.models import SessionCommit
from memory.sessions.persist import write_back
from memory.sessions.proposal import Proposal
from memory.sessions.store import stage_messages


@dataclass(frozen=True)
class CommitFailure:
    """Why the extract step could not give a proposal (its JSON is a workflow's activity input)."""

    ref: CommitRef
    reason: str
    detail: str


def archive(session: Session, ref: CommitRef) -> None:
    """An accepted commit stores its stage's structured summary and moves to ``archived``."""
    commit, chat = lock_commit(session, ref)
    if commit.status != CommitStatus.ACCEPTED.value or cancelled_by_deletion(session, commit, chat):
        return
    summary = archive_stage(session, chat, ref.commit_id, commit.to_sequence)
    move(commit, CommitStatus.ARCHIVED, summary_id=summary.summary_id if summary is not None else None)


def stage_to_extract(session: Session, ref: CommitRef) -> Stage | None:
    """The stage an archived commit asks the extractor about; None once the commit has moved past that."""
    commit, chat = lock_commit(session, ref)
    if commit.status != CommitStatus.ARCHIVED.value:
        return None
    return Stage(ref.session_id, stage_messages(session, chat, commit.from_sequence, commit.to_sequence))


def propose(session: Session, ref: CommitRef, proposal: Proposal) -> None:
    """Store the gated extractor answer in the commit row (``extracted``): a retried persist reads it there."""
    commit, chat = lock_commit(session, ref)
    if commit.status == CommitStatus.ARCHIVED.value and not cancelled_by_deletion(session, commit, chat):
        move(commit, CommitStatus.EXTRACTED, memories={**commit.memories, "proposed": proposal.to_json()})


def persist(session: Session, ref: CommitRef) -> SessionCommit:
    """Write the commit's proposal back and end it (or write nothing, if its owner's data was deleted since)."""
    commit, chat = lock_commit(session, ref)
    if CommitStatus(commit.status) in TERMINAL or cancelled_by_deletion(session, commit, chat):
        return commit
    outcome = write_back(session, commit, chat)
    move(commit, outcome.status, memories=outcome.memories, stats=outcome.stats, reasons=outcome.reasons)
    if outcome.status is CommitStatus.FAILED_REQUIRES_ACTION:
        release_stage(session, commit)
    return commit


def fail(session: Session, failure: CommitFailure) -> str:
    """The extractor could not be used after its retries: the commit asks for action, naming why, and gives
    its stage back. A commit that already ended keeps its end; the status it has is returned."""
    commit, _ = lock_commit(session, failure.ref)
    if CommitStatus(commit.status) not in TERMINAL:
        move(commit, CommitStatus.FAILED_REQUIRES_ACTION, error=failure.detail,
             reasons=[{"reason": failure.reason, "detail": failure.detail, "evidence_event_ids": []}])
        release_stage(session, commit)
    return commit.status
