"""What a deletion does to sessions: the ``derived_summaries`` layer and its verification.

Summaries and stable-choice rows are derived copies of a session's events. When events go (one event, a
session, a whole subject), every summary version citing them is scrubbed (its text, items and evidence
emptied, the row kept as proof), the choices they recorded are removed, and where the session itself
survives a new summary version is built from the events that remain (seed 003 §5.2: rebuild after a
deletion). A deleted session's row keeps only its id and owner. The source events layer runs first, so
the rebuild never sees the deleted events.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import ARRAY, ColumnElement, Text, and_, cast, delete, exists, false, func, or_, select, update
from sqlalchemy.orm import Session

from memory.db import affected_rows
from memory.deletion.scope import Scope, ScopeType, scope_of
from memory.models import DeletionJob, MemoryEvent, Tombstone
from memory.sessions.archive import store_summary, task_observation
from memory.sessions.models import ChatSession, SessionChoice, SessionCommit, SessionSummary


def _deleted_event_links(scope: Scope) -> list[str]:
    return [f"event:{scope.target_id}"] if scope.type is ScopeType.EVENT else []


def _covered(scope: Scope, job: DeletionJob, links: list[str]) -> ColumnElement[bool]:
    """Summary rows the deletion covers: citing a deleted event, or of a deleted session / subject."""
    mine = SessionSummary.user_id == scope.subject  # the subject's sessions (their ids are each user's own)
    if scope.type is ScopeType.SESSION:
        return and_(mine, SessionSummary.session_id == scope.target_id)
    if scope.type is ScopeType.SUBJECT:
        return mine
    if links:
        return SessionSummary.evidence_refs.op("?|")(cast(links, ARRAY(Text)))
    return false()


def purge_derived_summaries(session: Session, job: DeletionJob, batch: int) -> tuple[int, bool, dict[str, Any]]:
    """One batch: scrub covered summary versions, drop choices, scrub deleted sessions, rebuild survivors."""
    scope = scope_of(job)
    links = _deleted_event_links(scope)
    rows = session.execute(
        select(SessionSummary)
        .where(SessionSummary.tenant_id == job.tenant_id, SessionSummary.purged_at.is_(None),
               _covered(scope, job, links))
        .limit(batch)
        .with_for_update(skip_locked=True)
    ).scalars().all()
    rebuild: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (row.user_id, row.session_id)
        rebuild[key] = max(rebuild.get(key, 0), row.to_sequence)
        row.body, row.abstract, row.overview, row.evidence_refs = {}, "", "", []
        row.purged_at = func.now()
    session.flush()
    choices = _drop_choices(session, job, scope)
    commits_scrubbed = _scrub_commits(session, job, scope)
    sessions_scrubbed = _scrub_sessions(session, job, scope)
    rebuilt = 0
    if scope.type in (ScopeType.EVENT, ScopeType.MEMORY):
        for (user_id, session_id), to_sequence in rebuild.items():
            chat = session.get(ChatSession, (job.tenant_id, user_id, session_id))
            if chat is None or chat.purged_at is not None:
                continue
            if store_summary(session, chat, to_sequence, commit_id=None, reason="rebuilt_after_deletion",
                             observation=task_observation(session, chat)) is not None:
                rebuilt += 1
    done = len(rows) < batch
    return len(rows), done, {"summaries_scrubbed": len(rows), "summaries_rebuilt": rebuilt,
                             "choices_removed": choices, "sessions_scrubbed": sessions_scrubbed,
                             "commits_scrubbed": commits_scrubbed}


def _commits_covered(job: DeletionJob, scope: Scope) -> ColumnElement[bool]:
    """Commit rows whose stage held a deleted message, or that name a deleted memory (their entries' abstracts
    may quote either)."""
    mine = SessionCommit.user_id == scope.subject
    if scope.type is ScopeType.SESSION:
        return and_(mine, SessionCommit.session_id == scope.target_id)
    if scope.type is ScopeType.SUBJECT:
        return mine
    if scope.type is ScopeType.EVENT:
        event = select(MemoryEvent.user_id, MemoryEvent.session_id, MemoryEvent.sequence_no).where(
            MemoryEvent.tenant_id == job.tenant_id, MemoryEvent.event_id == uuid.UUID(scope.target_id)
        ).subquery()
        return exists().where(SessionCommit.user_id == event.c.user_id, SessionCommit.session_id == event.c.session_id,
                              event.c.sequence_no.between(SessionCommit.from_sequence, SessionCommit.to_sequence))
    if scope.type is not ScopeType.MEMORY:
        return false()  # a source record is in no session's commit
    # a deleted memory: the commits that name it (created, merged or skipped as its duplicate)
    return cast(SessionCommit.memories, Text).contains(scope.target_id)


def _commits_naming_deleted_memories(session: Session, job: DeletionJob, scope: Scope) -> ColumnElement[bool]:
    """The subject's commits that name a memory this job deleted, whatever stage held the deleted record: a
    later commit that corrected or merged into a memory quotes it, and so does the commit that created it when
    the correction is what goes (found by the wall: deleting a correcting message left the first commit's
    abstract of the memory it took with it)."""
    deleted = session.execute(select(Tombstone.target_id).where(
        Tombstone.tenant_id == job.tenant_id, Tombstone.job_id == job.job_id, Tombstone.target_type == "memory",
    )).scalars().all()
    if not deleted:
        return false()
    named = cast(SessionCommit.memories, Text)
    return and_(SessionCommit.user_id == scope.subject, or_(*(named.contains(memory_id) for memory_id in deleted)))


def _scrub_commits(session: Session, job: DeletionJob, scope: Scope) -> int:
    """Keep a covered commit's ids, decisions and counts; drop every text (abstracts, keys, proposals)."""
    covered = or_(_commits_covered(job, scope), _commits_naming_deleted_memories(session, job, scope))
    rows = session.execute(
        select(SessionCommit).where(SessionCommit.tenant_id == job.tenant_id, covered).with_for_update()
    ).scalars().all()
    scrubbed = 0
    for row in rows:
        if not row.memories:
            continue
        kept = {name: [_without_text(entry) for entry in row.memories.get(name, [])]
                for name in ("created", "merged", "skipped")}
        memories = {**kept, "candidates": row.memories.get("candidates", 0)}
        if memories != row.memories:
            row.memories = memories
            scrubbed += 1
    return scrubbed


def _without_text(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entry.items() if key not in ("abstract", "key")}


def _drop_choices(session: Session, job: DeletionJob, scope: Scope) -> int:
    condition: ColumnElement[bool]
    if scope.type is ScopeType.EVENT:
        condition = SessionChoice.event_id == uuid.UUID(scope.target_id)
    elif scope.type is ScopeType.SESSION:
        condition = and_(SessionChoice.session_id == scope.target_id, SessionChoice.user_id == scope.subject)
    elif scope.type is ScopeType.SUBJECT:
        condition = SessionChoice.user_id == scope.subject
    else:
        return 0
    return affected_rows(session.execute(delete(SessionChoice).where(SessionChoice.tenant_id == job.tenant_id,
                                                                      condition)))


def _scrub_sessions(session: Session, job: DeletionJob, scope: Scope) -> int:
    if scope.type not in (ScopeType.SESSION, ScopeType.SUBJECT):
        return 0
    condition = ChatSession.user_id == scope.subject
    if scope.type is ScopeType.SESSION:
        condition = and_(condition, ChatSession.session_id == scope.target_id)
    return affected_rows(session.execute(
        update(ChatSession)
        .where(ChatSession.tenant_id == job.tenant_id, condition, ChatSession.purged_at.is_(None),
               ChatSession.revision <= job.barrier_revision)
        .values(title=None, profile_snapshot=[], purged_at=func.now())
    ))


def summary_hits(session: Session, job: DeletionJob, probes: list[str]) -> dict[str, int]:
    """Verification: summary versions still citing a deleted event, or still holding a deleted text."""
    scope = scope_of(job)
    links = _deleted_event_links(scope)
    live = and_(SessionSummary.tenant_id == job.tenant_id, SessionSummary.purged_at.is_(None))
    hits = {"summaries_citing_deleted": session.execute(
        select(func.count()).select_from(SessionSummary).where(live, _covered(scope, job, links))
    ).scalar_one() if scope.type is not ScopeType.MEMORY else 0}
    owned = SessionSummary.user_id == scope.subject
    text_hits = 0
    # A deleted memory's messages stay (they are the user's, not the memory's): a summary quoting them is no copy
    # of the memory. Deleting messages (an event, a session, a subject) must leave no summary quoting them.
    for probe in probes if scope.type is not ScopeType.MEMORY else []:
        text_hits += session.execute(
            select(func.count()).select_from(SessionSummary).where(
                live, owned,
                or_(SessionSummary.overview.contains(probe), SessionSummary.abstract.contains(probe),
                    cast(SessionSummary.body, Text).contains(probe)),
            )
        ).scalar_one()
    hits["summary_text"] = text_hits
    hits["commit_text"] = sum(
        session.execute(
            select(func.count()).select_from(SessionCommit).where(
                SessionCommit.tenant_id == job.tenant_id, _commits_covered(job, scope),
                cast(SessionCommit.memories, Text).contains(probe),
            )
        ).scalar_one()
        for probe in probes
    )
    return hits


__all__ = ["purge_derived_summaries", "summary_hits"]
