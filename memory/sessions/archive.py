"""Archiving a stage: the structured summary as an immutable version, and its rebuild after a deletion.

Seed 004 §8.3 step 1: the transcript (L2) is the stage's own events, read on demand, never copied; the
structured summary (L1, :func:`memory.sessions.summary.summarize`) and its abstract (L0) are stored as a
new version of the session's summary. A summary covers the whole session up to the stage's end, so the
latest version is the whole picture. It is a rebuildable view (seed 003 §5.2): when an event it cites is
deleted, every version citing it is scrubbed and a new version is built from the remaining events.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Boolean, ColumnElement, and_, func, literal, select, update
from sqlalchemy.orm import Session

from memory.models import Tombstone
from memory.sessions.messages import Stage
from memory.sessions.models import ChatSession, SessionSummary
from memory.sessions.store import stage_messages
from memory.sessions.summary import StructuredSummary, summarize
from memory.store.events import next_revision
from memory.tasks.models import Task

REREAD_NOTE = "observed when the summary was built; re-read the task before acting on it"


def task_observation(session: Session, chat: ChatSession) -> dict[str, Any] | None:
    """The session's task as the read model shows it now (status and state_version), if it has one."""
    if chat.task_id is None:
        return None
    task = session.execute(
        select(Task).where(Task.tenant_id == chat.tenant_id, Task.task_id == chat.task_id,
                           Task.owner_user_id == chat.user_id)
    ).scalar_one_or_none()
    if task is None:
        return {"task_id": chat.task_id, "status": None, "state_version": None, "note": "task not found"}
    return {"task_id": task.task_id, "status": task.status, "state_version": task.state_version,
            "observed_at": task.updated_at.isoformat(), "note": REREAD_NOTE}


def _evidence(summary: StructuredSummary) -> list[str]:
    cited = {event for items in summary.sections().values() for item in items for event in item.source_event_ids}
    return sorted(f"event:{event}" for event in cited)


def summary_tombstoned() -> ColumnElement[bool]:
    """A summary citing an event a deletion barrier has tombstoned: hidden at once, until the purge rebuilds it."""
    link = (literal("event:") + Tombstone.target_id).self_group()
    return select(Tombstone.target_id).where(
        Tombstone.tenant_id == SessionSummary.tenant_id, Tombstone.target_type == "event",
        SessionSummary.evidence_refs.op("?", return_type=Boolean)(link),
    ).exists()


def summary_readable() -> ColumnElement[bool]:
    """A version that may be read: not scrubbed, and citing no event whose deletion is under way."""
    return and_(SessionSummary.purged_at.is_(None), ~summary_tombstoned())


def latest_summary(session: Session, chat: ChatSession) -> SessionSummary | None:
    """The newest readable version (:func:`summary_readable`)."""
    return session.execute(
        select(SessionSummary)
        .where(SessionSummary.tenant_id == chat.tenant_id, SessionSummary.user_id == chat.user_id,
               SessionSummary.session_id == chat.session_id, summary_readable())
        .order_by(SessionSummary.version.desc())
        .limit(1)
    ).scalar_one_or_none()


def store_summary(
    session: Session, chat: ChatSession, to_sequence: int, *, commit_id: str | None, reason: str,
    observation: Mapping[str, Any] | None,
) -> SessionSummary | None:
    """Summarise the session's remaining events up to ``to_sequence`` as its next version (None: no events)."""
    stage = Stage(chat.session_id, stage_messages(session, chat, 1, to_sequence))
    if not stage.messages:
        return None
    summary = summarize(stage, task_observation=observation)
    version = int(session.execute(
        select(func.coalesce(func.max(SessionSummary.version), 0))
        .where(SessionSummary.tenant_id == chat.tenant_id, SessionSummary.user_id == chat.user_id,
               SessionSummary.session_id == chat.session_id)
    ).scalar_one()) + 1
    session.execute(
        update(SessionSummary)
        .where(SessionSummary.tenant_id == chat.tenant_id, SessionSummary.user_id == chat.user_id,
               SessionSummary.session_id == chat.session_id, SessionSummary.superseded_at.is_(None))
        .values(superseded_at=func.now())
    )
    row = SessionSummary(
        tenant_id=chat.tenant_id,
        user_id=chat.user_id,
        session_id=chat.session_id,
        version=version,
        summary_id=uuid.uuid4(),
        commit_id=commit_id,
        reason=reason,
        from_sequence=summary.from_sequence,
        to_sequence=summary.to_sequence,
        body=summary.as_json(),
        abstract=summary.abstract,
        overview=summary.overview(),
        evidence_refs=_evidence(summary),
        task_observation=dict(observation) if observation is not None else None,
        revision=next_revision(session),
    )
    session.add(row)
    session.flush()
    return row


def archive_stage(session: Session, chat: ChatSession, commit_id: str, to_sequence: int) -> SessionSummary | None:
    """The commit's summary version: built once per commit id (a retried activity finds it)."""
    existing = session.execute(
        select(SessionSummary).where(SessionSummary.tenant_id == chat.tenant_id,
                                     SessionSummary.user_id == chat.user_id,
                                     SessionSummary.session_id == chat.session_id,
                                     SessionSummary.commit_id == commit_id)
    ).scalar_one_or_none()
    if existing is not None:
        return existing
    return store_summary(session, chat, to_sequence, commit_id=commit_id, reason="commit",
                         observation=task_observation(session, chat))
