"""DeletionWorkflow: after the barrier (already committed by the API), purge every layer and verify.

accepted → running → completed; a transient failure waits in retry_wait and tries
again; a retention or legal hold parks the job in blocked_by_retention until
released; what cannot continue ends in failed_requires_action until an operator
resumes it. Checkpoints live in the read model, so a resumed job continues
where it stopped. Only a clean verification may reach completed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.deletion import DeletionActivities, JobRef, LayerRequest, StatusChange
    from memory.deletion.jobs import PURGE_LAYERS, JobStatus, Layer


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
        self._status = JobStatus.ACCEPTED.value

    @workflow.run
    async def run(self, request: DeletionInput) -> DeletionResult:
        self._request = request
        self._ref = JobRef(request.tenant_id, request.job_id)
        await self._wait_for_holds()
        await self._set(JobStatus.RUNNING)
        removed: dict[str, int] = {}
        while True:
            for layer in PURGE_LAYERS:
                removed[layer.value] = removed.get(layer.value, 0) + await self._purge(layer)
            outcome = await workflow.execute_activity_method(
                DeletionActivities.verify, self._ref, start_to_close_timeout=timedelta(minutes=10)
            )
            if outcome.clean:
                break
            # Something is still findable: fail loudly and wait for an operator, then purge again.
            await self._set(JobStatus.FAILED_REQUIRES_ACTION, f"verification found deleted data: {outcome.hits}")
            await self._wait_for_resume()
        removed[Layer.VERIFICATION_PROBES.value] = await self._purge(Layer.VERIFICATION_PROBES)
        await self._set(JobStatus.COMPLETED)
        return DeletionResult(JobStatus.COMPLETED.value, removed)

    async def _purge(self, layer: Layer) -> int:
        rounds = 0
        while True:
            try:
                outcome = await workflow.execute_activity_method(
                    DeletionActivities.purge_layer,
                    LayerRequest(self._ref, layer.value),
                    start_to_close_timeout=timedelta(hours=1),
                    heartbeat_timeout=timedelta(seconds=self._request.heartbeat_timeout_seconds),
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(seconds=1),
                        maximum_attempts=3,
                        non_retryable_error_types=["PurgeBlocked"],
                    ),
                )
                return outcome.removed
            except ActivityError as err:
                rounds += 1
                reason = str(err.cause) if err.cause else str(err)
                permanent = isinstance(err.cause, ApplicationError) and err.cause.non_retryable
                if permanent or rounds >= self._request.max_retry_rounds:
                    await self._set(JobStatus.FAILED_REQUIRES_ACTION, f"{layer.value}: {reason}")
                    await self._wait_for_resume()
                    rounds = 0
                else:
                    await self._set(JobStatus.RETRY_WAIT, f"{layer.value}: {reason}")
                    await workflow.sleep(timedelta(seconds=self._request.retry_wait_seconds * rounds))
                    await self._set(JobStatus.RUNNING)

    async def _wait_for_holds(self) -> None:
        while await workflow.execute_activity_method(
            DeletionActivities.active_holds, self._ref, start_to_close_timeout=QUICK
        ):
            await self._set(JobStatus.BLOCKED_BY_RETENTION, "a retention or legal hold covers this subject")
            self._holds_changed = False
            try:
                await workflow.wait_condition(
                    lambda: self._holds_changed, timeout=timedelta(seconds=self._request.hold_recheck_seconds)
                )
            except TimeoutError:
                pass

    async def _wait_for_resume(self) -> None:
        self._resume = False
        await workflow.wait_condition(lambda: self._resume)
        await self._set(JobStatus.RUNNING)

    async def _set(self, status: JobStatus, error: str | None = None) -> None:
        if status.value == self._status and error is None:
            return
        await workflow.execute_activity_method(
            DeletionActivities.set_status, StatusChange(self._ref, status.value, error), start_to_close_timeout=QUICK
        )
        self._status = status.value

    @workflow.signal
    def resume(self) -> None:
        """An operator fixed the cause of failed_requires_action: continue from the checkpoints."""
        self._resume = True

    @workflow.signal
    def holds_changed(self) -> None:
        """A hold on the subject was released: check again now instead of at the next recheck."""
        self._holds_changed = True

    @workflow.query
    def status(self) -> str:
        return self._status
