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
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.db import heartbeating, shielded_session
from memory.llm import LlmUnavailable
from memory.sessions import commit_steps
from memory.sessions.commit_steps import CommitFailure
from memory.sessions.commits import CommitRef, ref_of
from memory.sessions.extraction.base import Extractor
from memory.sessions.policy import CommitPolicy, sweep_tenant
from memory.sessions.proposal import Proposal


@dataclass(frozen=True)
class SessionSweepRequest:
    tenant_id: str
    limit: int


@dataclass(frozen=True)
class StartCommit:
    ref: CommitRef
    workflow_id: str


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
        with shielded_session(self.engine, request.tenant_id) as session:
            due = sweep_tenant(session, request.tenant_id, self.policy, datetime.now(UTC), request.limit)
            return [StartCommit(ref_of(c), c.workflow_id) for c in due]

    @activity.defn(name="session_commit_archive")
    def archive(self, ref: CommitRef) -> None:
        with shielded_session(self.engine, ref.tenant_id) as session:
            commit_steps.archive(session, ref)

    @activity.defn(name="session_commit_extract")
    def extract(self, ref: CommitRef) -> None:
        with shielded_session(self.engine, ref.tenant_id) as session:
            stage = commit_steps.stage_to_extract(session, ref)
        if stage is None:
            return
        with heartbeating(), self._slots:
            try:
                extraction = self.extractor.extract(stage)
            except LlmUnavailable as exc:
                if exc.retryable:
                    raise
                raise ApplicationError(str(exc), type="ExtractorRefused", non_retryable=True) from exc
        proposal = Proposal.gated(stage, extraction)
        with shielded_session(self.engine, ref.tenant_id) as session:
            commit_steps.propose(session, ref, proposal)

    @activity.defn(name="session_commit_persist")
    def persist(self, ref: CommitRef) -> str:
        with shielded_session(self.engine, ref.tenant_id) as session:
            return commit_steps.persist(session, ref).status

    @activity.defn(name="session_commit_fail")
    def fail(self, failure: CommitFailure) -> str:
        """The extractor could not be used after its retries: the commit asks for action, naming why."""
        with shielded_session(self.engine, failure.ref.tenant_id) as session:
            return commit_steps.fail(session, failure)
