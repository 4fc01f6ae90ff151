"""KnowledgeReviewWorkflow: one per candidate (id ``knowledge-review-{tenant}-{candidate}``), from the moment it
opens until it is approved, rejected or expired.

A review arrives as the Update ``review``: its validator judges the reviewer, the hash and the state version
against the workflow's state (:func:`memory.knowledge.review.check_review`; no I/O), then an activity applies
it to the row, which checks again. ``request_changes`` keeps the workflow waiting for the author's revision
(the ``revised`` signal carries the new hash and state version). Until the deadline, a reminder goes to the
tenant's webhook every period while the candidate waits for a reviewer; at the deadline it becomes EXPIRED.
The history holds ids, hashes, versions, roles, decisions and redacted reasons: never a claim.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.sweeps import SweepPaging, continue_if_stopped, each_tenant, start_once

with workflow.unsafe.imports_passed_through():
    from activities.knowledge import (
        ApplyReviewInput,
        KnowledgeActivities,
        KnowledgeReminderInput,
        ReviewOutcome,
        ReviewRef,
        SyncInput,
        UnreviewedInput,
    )
    from activities.tenants import SweepKind
    from memory.errors import MnemoError
    from memory.knowledge import review
    from memory.knowledge.candidates import CandidateStatus
    from memory.knowledge.review import ReviewRequest, ReviewState
    from workflows.report_task import ApprovalPolicy
    from workflows.task_support import DELIVERY_RETRY, WRITE_OPTIONS, refuse

WORKFLOW_NAME = "KnowledgeReview"
PATIENT: dict[str, Any] = {"start_to_close_timeout": timedelta(seconds=30), "retry_policy": RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(minutes=1))}
"""The review's own bookkeeping (sync, expire) retries until the database answers, however long it is down: a
failed review workflow could never be decided nor expire (the sweep does not restart a review that ran)."""


def workflow_id(tenant_id: str, candidate_id: str) -> str:
    return f"knowledge-review-{tenant_id}-{candidate_id}"


@dataclass(frozen=True)
class KnowledgeReviewInput:
    tenant_id: str
    state: ReviewState
    """The candidate as it opened (ids, hash, versions, author): the validator judges against it from the start."""
    opened_at: str
    """ISO instant the candidate opened: the deadline and reminders count from it."""
    policy: ApprovalPolicy
    """A review waits like a task's approval: a deadline, and a reminder every period until it."""


@dataclass(frozen=True)
class Revised:
    """The author's revision, as stored: the hash and state version a reviewer must now name."""

    content_sha256: str
    state_version: int
    status: str = CandidateStatus.PENDING_REVIEW
    """The row's status with that state version (a decision re-sends the row's state before it is judged)."""


@workflow.defn(name=WORKFLOW_NAME)
class KnowledgeReviewWorkflow:
    @workflow.init
    def __init__(self, inp: KnowledgeReviewInput) -> None:
        self._state = inp.state
        self._ref = ReviewRef(inp.tenant_id, inp.state.candidate_id)
        self._lock = asyncio.Lock()
        self._deciding = False
        self._decided: dict[tuple[str, str], tuple[str, ReviewOutcome]] = {}
        self._reminders = 0

    @workflow.run
    async def run(self, inp: KnowledgeReviewInput) -> ReviewState:
        opened = datetime.fromisoformat(inp.opened_at)
        sync = SyncInput(self._ref, inp.policy.deadline_seconds)
        await self._sync(sync)
        deadline = (datetime.fromisoformat(self._state.deadline_at) if self._state.deadline_at
                    else opened + timedelta(seconds=inp.policy.deadline_seconds))
        every = inp.policy.reminder_every_seconds
        started = max(opened, workflow.now())  # a review the sweep starts late sends no burst of reminders
        while self._state.status not in review.CLOSED:
            wake = min(started + timedelta(seconds=every * (self._reminders + 1)), deadline)
            try:
                await workflow.wait_condition(lambda: self._closed(),
                                              timeout=max((wake - workflow.now()).total_seconds(), 0.001))
            except TimeoutError:
                await self._sync(sync)  # withdrawn by a deletion, or a revision whose signal was lost
                if self._closed():
                    break
                if workflow.now() >= deadline:
                    async with self._lock:
                        if not self._closed():
                            self._state = await workflow.execute_activity_method(
                                KnowledgeActivities.expire, self._ref, **PATIENT)
                    break
                self._reminders += 1
                if self._state.status == CandidateStatus.PENDING_REVIEW:
                    self._remind(self._reminders, max(every, 60.0))
        await workflow.wait_condition(lambda: not self._deciding)
        return self._state

    async def _sync(self, sync: SyncInput) -> None:
        """Take the candidate's state from the database, between decisions (the row is the truth)."""
        async with self._lock:
            synced = await workflow.execute_activity_method(KnowledgeActivities.sync, sync, **PATIENT)
            if synced.state_version >= self._state.state_version:  # a revision signalled meanwhile is newer
                self._state = synced

    def _closed(self) -> bool:
        return self._state.status in review.CLOSED

    def _remind(self, number: int, within_seconds: float) -> None:
        """Beside the wait (a slow receiver never delays a decision); a failed delivery is the receiver's loss."""
        delivery = workflow.start_activity_method(
            KnowledgeActivities.deliver_reminder, KnowledgeReminderInput(self._ref, number),
            start_to_close_timeout=timedelta(seconds=30), schedule_to_close_timeout=timedelta(seconds=within_seconds),
            retry_policy=DELIVERY_RETRY,
        )
        delivery.add_done_callback(lambda done: done.cancelled() or done.exception())

    @workflow.update
    async def review(self, request: ReviewRequest) -> ReviewOutcome:
        """Approve, reject or request changes (validated by :meth:`validate_review`), applied by an activity."""
        key = (request.decision, request.content_sha256)
        recorded = self._decided.get(key)
        if recorded is not None and review.is_replay(self._state, recorded[0], request.decision, request):
            return recorded[1]
        self._deciding = True
        try:
            async with self._lock:
                self._judge(request)  # again, now that no other decision is in flight
                try:
                    outcome = await workflow.execute_activity_method(
                        KnowledgeActivities.apply_review,
                        ApplyReviewInput(self._ref, request), **WRITE_OPTIONS)
                except ActivityError as exc:
                    cause = exc.cause
                    if isinstance(cause, ApplicationError):
                        raise refuse(cause.type or "refused", cause.message) from None
                    raise
                self._state = outcome.state
                if outcome.conflicts_changed:
                    raise refuse("knowledge_conflicts_changed",
                                 "published knowledge of this key and scope changed since you read the candidate: "
                                 "read its conflicts again (state_version "
                                 f"{outcome.state.state_version}) before you decide")
                self._decided[key] = (request.user_id, outcome)
                return outcome
        finally:
            self._deciding = False

    @review.validator
    def validate_review(self, request: ReviewRequest) -> None:
        recorded = self._decided.get((request.decision, request.content_sha256))
        if recorded is not None and review.is_replay(
                self._state, recorded[0], request.decision, request):
            return  # the reviewer's own decision, already applied: the handler answers it again
        if self._deciding:
            raise refuse("decision_in_progress", "another decision on this candidate is being recorded; read it again")
        self._judge(request)

    def _judge(self, request: ReviewRequest) -> None:
        try:
            review.check_review(self._state, request)
        except MnemoError as refusal:
            raise refuse(refusal.code, refusal.message) from None

    @workflow.signal
    def revised(self, revision: Revised) -> None:
        """The author revised the candidate (PUT /knowledge-candidates/{id}): it waits for a review again."""
        if revision.state_version > self._state.state_version and not self._closed():
            self._state = replace(self._state, status=revision.status,
                                  content_sha256=revision.content_sha256, state_version=revision.state_version)

    @workflow.query
    def state(self) -> ReviewState:
        return self._state


@dataclass(frozen=True)
class KnowledgeReviewSweepInput:
    limit_per_tenant: int = 100
    paging: SweepPaging = field(default_factory=SweepPaging)


SWEEP_SCHEDULE_ID = "mnemo-knowledge-review-sweep"


@workflow.defn(name="KnowledgeReviewSweep")
class KnowledgeReviewSweepWorkflow:
    """Started every minute by a Schedule: starts the review of each open candidate no review ran for — opened by
    a session commit, a finished task or a deletion's re-review (in the worker, which starts no workflow), or by the
    API while Temporal was down."""

    @workflow.run
    async def run(self, request: KnowledgeReviewSweepInput) -> int:
        async def start_due(tenant: str) -> int:
            due = await workflow.execute_activity_method(
                KnowledgeActivities.unreviewed, UnreviewedInput(tenant, request.limit_per_tenant),
                start_to_close_timeout=timedelta(minutes=1))
            started = 0
            for item in due:
                inp = KnowledgeReviewInput(tenant, item.state, item.opened_at,
                                           ApprovalPolicy(item.deadline_seconds, item.reminder_every_seconds))
                started += await start_once(KnowledgeReviewWorkflow.run, inp,
                                            workflow_id=workflow_id(tenant, item.state.candidate_id), tenant_id=tenant)
            return started

        swept = await each_tenant(start_due, SweepKind.KNOWLEDGE_REVIEW, request.paging)
        continue_if_stopped(swept, request)
        return swept.total
