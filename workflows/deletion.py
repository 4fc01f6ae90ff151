"""DeletionWorkflow: after the barrier (already committed by the API), purge every layer and verify.

accepted → running → completed; a transient failure waits in retry_wait and tries
again; a retention or legal hold parks the job in blocked_by_retention until
released; what cannot continue ends in failed_requires_action until an operator
resumes it. Checkpoints live in the read model, so a resumed job continues
where it stopped. Only a clean verification may reach completed: ``finish`` verifies the job in a round
with the tenant's other purged jobs (the residue scan of the rows, files and histories, and the targeted checks).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.deletion import DeletionActivities, FinishRequest, JobRef, PurgeRequest, StatusChange
    from memory.deletion.jobs import JobStatus


@dataclass(frozen=True)
class DeletionInput:
    tenant_id: str
    job_id: str
    retry_wait_seconds: float = 30.0
    max_retry_rounds: int = 5
    heartbeat_timeout_seconds: float = 30.0
    hold_recheck_seconds: float = 3600.0


@dataclass(frozen=True)
class DeletionResult:
    status: str
    removed: dict[str, int]


QUICK = timedelta(seconds=30)


@workflow.defn(name="Deletion")
class DeletionWorkflow:
    def __init__(self) -> None:
        self._resume = False
        self._holds_changed = False

    @workflow.run
    async def run(self, request: DeletionInput) -> DeletionResult:
        self._request = request
        self._ref = JobRef(request.tenant_id, request.job_id)
        while True:
            self._holds_changed = False  # cleared before begin() can report the job blocked
            if not await workflow.execute_activity_method(
                DeletionActivities.begin, self._ref, start_to_close_timeout=QUICK
            ):
                break
            await self._wait_for_hold_release()
        removed: dict[str, int] = {}
        again = False
        while True:
            for layer, count in (await self._purge(again)).items():
                removed[layer] = removed.get(layer, 0) + count
            self._resume = False  # a resume signalled once the job is failed_requires_action must count
            history_copies: list[str] = []
            # A round (``finish``) scans the histories itself; runs started before rounds replay their own scan.
            if not workflow.patched("residue-rounds") and workflow.patched("residue-scan-histories"):
                history_copies = await workflow.execute_activity_method(
                    DeletionActivities.scan_histories,
                    self._ref,
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=timedelta(seconds=max(self._request.heartbeat_timeout_seconds, 30.0)),
                )
            outcome = await workflow.execute_activity_method(
                DeletionActivities.finish,
                FinishRequest(self._ref.tenant_id, self._ref.job_id, history_copies),
                start_to_close_timeout=timedelta(minutes=10),
                # A killed worker's verification is retried once its heartbeats stop, not after 10 minutes.
                heartbeat_timeout=timedelta(seconds=self._request.heartbeat_timeout_seconds),
            )
            if outcome.clean:
                return DeletionResult(JobStatus.COMPLETED.value, removed)
            # Something is still findable: the job is failed_requires_action; purge everything again once resumed.
            await self._wait_for_resume()
            again = True

    async def _purge(self, again: bool) -> dict[str, int]:
        rounds = 0
        while True:
            try:
                return await workflow.execute_activity_method(
                    DeletionActivities.purge,
                    PurgeRequest(self._ref, again),
                    start_to_close_timeout=timedelta(hours=1),
                    heartbeat_timeout=timedelta(seconds=self._request.heartbeat_timeout_seconds),
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(seconds=1),
                        maximum_attempts=3,
                        non_retryable_error_types=["PurgeBlocked"],
                    ),
                )
            except ActivityError as err:
                rounds += 1
                reason = str(err.cause) if err.cause else str(err)
                permanent = isinstance(err.cause, ApplicationError) and err.cause.non_retryable
                if permanent or rounds >= self._request.max_retry_rounds:
                    self._resume = False  # cleared before the status is visible, so no resume is lost
                    await self._set(JobStatus.FAILED_REQUIRES_ACTION, reason)
                    await self._wait_for_resume()
                    rounds = 0
                else:
                    await self._set(JobStatus.RETRY_WAIT, reason)
                    await workflow.sleep(timedelta(seconds=self._request.retry_wait_seconds * rounds))
                    await self._set(JobStatus.RUNNING)

    async def _wait_for_hold_release(self) -> None:
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._holds_changed, timeout=timedelta(seconds=self._request.hold_recheck_seconds)
            )

    async def _wait_for_resume(self) -> None:
        await workflow.wait_condition(lambda: self._resume)
        await self._set(JobStatus.RUNNING)

    async def _set(self, status: JobStatus, error: str | None = None) -> None:
        await workflow.execute_activity_method(
            DeletionActivities.set_status, StatusChange(self._ref, status.value, error), start_to_close_timeout=QUICK
        )

    @workflow.signal
    def resume(self) -> None:
        """An operator fixed the cause of failed_requires_action: continue from the checkpoints."""
        self._resume = True

    @workflow.signal
    def holds_changed(self) -> None:
        """A hold on the subject was released: check again now instead of at the next recheck."""
        self._holds_changed = True
