"""``session.commit`` as a workflow (seed 004 §8.3): archive the stage, extract, persist. One per commit id.

Each step is an idempotent activity that records its result in the commit's row, so a worker killed at
any point resumes at the step it was in and never writes a memory twice. The extractor step retries with
backoff (an LLM endpoint that is down or answers 429); when it keeps failing, the commit ends as
``failed_requires_action`` naming the reason, never as a silent zero.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.sessions import CommitFailure, CommitRef, SessionActivities

STEP_TIMEOUT = timedelta(minutes=2)
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
            detail = str(exc.cause) if exc.cause is not None else str(exc)
            return await workflow.execute_activity_method(
                SessionActivities.fail,
                CommitFailure(ref, "extractor_unavailable", f"the extractor could not be used: {detail}"),
                start_to_close_timeout=STEP_TIMEOUT,
            )
        return await workflow.execute_activity_method(
            SessionActivities.persist, ref, start_to_close_timeout=STEP_TIMEOUT
        )
