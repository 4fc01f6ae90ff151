"""``session.commit`` as a workflow (seed 004 §8.3): archive the stage, extract, persist. One per commit id.

Each step is an idempotent activity that records its result in the commit's row, so a worker killed at
any point resumes at the step it was in and never writes a memory twice. The extractor step retries with
backoff (an LLM endpoint that is down or answers 429); when it keeps failing, the commit ends as
``failed_requires_action`` naming the reason, never as a silent zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.sweeps import SweepPaging, continue_if_stopped, each_tenant, start_once

with workflow.unsafe.imports_passed_through():
    from activities.sessions import SessionActivities, SessionSweepRequest
    from activities.tenants import SweepKind
    from memory.sessions.commit_steps import CommitFailure
    from memory.sessions.commits import CommitRef

SWEEP_SCHEDULE_ID = "mnemo-session-commit-sweep"

STEP_TIMEOUT = timedelta(minutes=2)
EXTRACTOR_FAILURES = frozenset({"LlmUnavailable", "ExtractorRefused"})
"""Error types an extract attempt ends with when the endpoint failed (not mnemo's own step)."""
EXTRACT_TIMEOUT = timedelta(minutes=5)
EXTRACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=30),
    maximum_attempts=6, non_retryable_error_types=["ExtractorRefused"],
)


@workflow.defn(name="SessionCommit")
class SessionCommitWorkflow:
    @workflow.run
    async def run(self, ref: CommitRef) -> str:
        await workflow.execute_activity_method(SessionActivities.archive, ref, start_to_close_timeout=STEP_TIMEOUT)
        try:
            await workflow.execute_activity_method(
                SessionActivities.extract, ref, start_to_close_timeout=EXTRACT_TIMEOUT,
                heartbeat_timeout=timedelta(seconds=30), retry_policy=EXTRACT_RETRY,
            )
        except ActivityError as exc:
            cause = exc.cause
            detail = str(cause) if cause is not None else str(exc)
            # The endpoint's own failures name the extractor; anything else is a fault of the step itself.
            unavailable = isinstance(cause, ApplicationError) and cause.type in EXTRACTOR_FAILURES
            reason, what = ("extractor_unavailable", "the extractor could not be used") if unavailable else (
                "extraction_failed", "extracting failed")
            return await workflow.execute_activity_method(
                SessionActivities.fail, CommitFailure(ref, reason, f"{what}: {detail}"),
                start_to_close_timeout=STEP_TIMEOUT,
            )
        return await workflow.execute_activity_method(
            SessionActivities.persist, ref, start_to_close_timeout=STEP_TIMEOUT
        )


@dataclass(frozen=True)
class SessionSweepInput:
    limit_per_tenant: int = 100
    paging: SweepPaging = field(default_factory=SweepPaging)


@workflow.defn(name="SessionCommitSweep")
class SessionCommitSweepWorkflow:
    """Started every minute by a Schedule: commits idle sessions (the commit policy's idle time) and starts
    accepted commits whose workflow never started (accepted while Temporal was down)."""

    @workflow.run
    async def run(self, request: SessionSweepInput) -> int:
        async def start_due(tenant: str) -> int:
            due = await workflow.execute_activity_method(
                SessionActivities.sweep, SessionSweepRequest(tenant, request.limit_per_tenant),
                start_to_close_timeout=STEP_TIMEOUT,
            )
            started = 0
            for item in due:  # a commit whose workflow runs, or ran, is left to that run
                started += await start_once(SessionCommitWorkflow.run, item.ref, workflow_id=item.workflow_id,
                                            tenant_id=item.ref.tenant_id)
            return started

        swept = await each_tenant(start_due, SweepKind.SESSION_COMMIT, request.paging)
        continue_if_stopped(swept, request)
        return swept.total
