"""The activities of a session commit: archive the stage, extract candidates, persist, or record a failure.

Thin on purpose: each opens one transaction and calls :mod:`memory.sessions`. The extraction reads the
stage in one transaction, asks the extractor outside any transaction (an LLM call may take a minute), and
stores the gated answer in the commit's row in another, so a retry of a later step never calls the
extractor again. Extractor calls of one worker are bounded by a semaphore: a commit storm queues here
instead of sending a burst of requests to the endpoint (and meeting its 429s).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, or_, select
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.db import heartbeating, shielded_session
from memory.sessions.archive import archive_stage
from memory.sessions.commits import (
    TERMINAL,
    CommitRef,
    CommitStatus,
    cancelled_by_deletion,
    lock_commit,
    move,
    ref_of,
    release_stage,
)
from memory.sessions.extraction.base import Extractor
from memory.sessions.extraction.gates import apply_gates
from memory.sessions.extraction.llm import LlmUnavailable
from memory.sessions.messages import Stage
from memory.sessions.models import SessionCommit
from memory.sessions.persist import candidate_json, persist, rejection_json
from memory.sessions.policy import CommitPolicy, commit_idle
from memory.sessions.store import stage_messages


@dataclass(frozen=True)
class CommitFailure:
    ref: CommitRef
    reason: str
    detail: str


@dataclass(frozen=True)
class SessionSweepRequest:
    tenant_id: str
    limit: int


@dataclass(frozen=True)
class StartCommit:
    ref: CommitRef
    workflow_id: str


STALLED_AFTER = timedelta(minutes=1)
"""An accepted commit whose workflow has not moved it for this long may never have been started (Temporal was
down when it was accepted): the sweep starts it, under its own id, so a running one is left alone."""


class SessionActivities:
    def __init__(
        self, engine: Engine, extractor: Extractor, extractor_slots: int = 4, policy: CommitPolicy | None = None
    ) -> None:
        self.engine = engine
        self.extractor = extractor
        self.policy = policy or CommitPolicy()
        self._slots = threading.BoundedSemaphore(extractor_slots)

    def all(self) -> list[Callable[..., Any]]:
        return [self.archive, self.extract, self.persist, self.fail, self.sweep]

    @activity.defn(name="session_commit_sweep")
    def sweep(self, request: SessionSweepRequest) -> list[StartCommit]:
        """Commit the tenant's idle sessions, and list the commits whose workflows must be started."""
        now, tenant_id = datetime.now(UTC), request.tenant_id
        with shielded_session(self.engine, tenant_id) as session:
            commit_idle(session, tenant_id, self.policy, now, request.limit)
            session.flush()
            waiting = session.execute(
                select(SessionCommit).where(
                    SessionCommit.tenant_id == tenant_id, SessionCommit.status == CommitStatus.ACCEPTED.value,
                    or_(SessionCommit.trigger == "policy:idle", SessionCommit.updated_at < now - STALLED_AFTER),
                ).limit(request.limit)
            ).scalars().all()
            return [StartCommit(ref_of(c), c.workflow_id) for c in waiting]

    @activity.defn(name="session_commit_archive")
    def archive(self, ref: CommitRef) -> None:
        with shielded_session(self.engine, ref.tenant_id) as session:
            commit, chat = lock_commit(session, ref.tenant_id, ref.session_id, ref.commit_id, ref.user_id)
            if commit.status != CommitStatus.ACCEPTED.value or cancelled_by_deletion(session, commit, chat):
                return
            summary = archive_stage(session, chat, ref.commit_id, commit.to_sequence)
            move(commit, CommitStatus.ARCHIVED, summary_id=summary.summary_id if summary is not None else None)

    @activity.defn(name="session_commit_extract")
    def extract(self, ref: CommitRef) -> None:
        with shielded_session(self.engine, ref.tenant_id) as session:
            commit, chat = lock_commit(session, ref.tenant_id, ref.session_id, ref.commit_id, ref.user_id)
            if commit.status != CommitStatus.ARCHIVED.value:
                return
            stage = Stage(ref.session_id, stage_messages(session, chat, commit.from_sequence, commit.to_sequence))
        with heartbeating(), self._slots:
            try:
                extraction = self.extractor.extract(stage)
            except LlmUnavailable as exc:
                if exc.retryable:
                    raise
                raise ApplicationError(str(exc), type="ExtractorRefused", non_retryable=True) from exc
        gated = apply_gates(stage, extraction)
        proposed = {
            "candidates": [candidate_json(c) for c in gated.admitted],
            "rejections": [rejection_json(r) for r in gated.rejections],
            "usage": {"extractor": extraction.extractor, "model": extraction.model,
                      "prompt_tokens": extraction.prompt_tokens, "completion_tokens": extraction.completion_tokens},
        }
        with shielded_session(self.engine, ref.tenant_id) as session:
            commit, chat = lock_commit(session, ref.tenant_id, ref.session_id, ref.commit_id, ref.user_id)
            if commit.status == CommitStatus.ARCHIVED.value and not cancelled_by_deletion(session, commit, chat):
                move(commit, CommitStatus.EXTRACTED, memories={**commit.memories, "proposed": proposed})

    @activity.defn(name="session_commit_persist")
    def persist(self, ref: CommitRef) -> str:
        with shielded_session(self.engine, ref.tenant_id) as session:
            return persist(session, ref.tenant_id, ref.session_id, ref.commit_id, ref.user_id).status

    @activity.defn(name="session_commit_fail")
    def fail(self, failure: CommitFailure) -> str:
        """The extractor could not be used after its retries: the commit asks for action, naming why."""
        ref = failure.ref
        with shielded_session(self.engine, ref.tenant_id) as session:
            commit, _ = lock_commit(session, ref.tenant_id, ref.session_id, ref.commit_id, ref.user_id)
            if CommitStatus(commit.status) not in TERMINAL:
                move(commit, CommitStatus.FAILED_REQUIRES_ACTION, error=failure.detail,
                     reasons=[{"reason": failure.reason, "detail": failure.detail, "evidence_event_ids": []}])
                release_stage(session, commit)
            return commit.status
