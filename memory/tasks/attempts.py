"""One try of a task's compute step: replay its stored success, or start an attempt, perform the step, and record
the failure, or the success together with the task's transition.

Three transactions, in this order, and never merged: the attempt row is committed before the step runs, so a
worker killed while the step runs leaves a RUNNING attempt the next try marks ABANDONED; the failure and the
success are each recorded in their own. Performing the step (and storing its artifacts' bytes) happens outside
any transaction. What runs the step (fault drills, heartbeats, Temporal's errors) is the caller's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from memory.tasks import keys
from memory.tasks.artifacts import ArtifactMeta, add_artifacts
from memory.tasks.contract import StepFailed
from memory.tasks.models import TaskAttempt
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus
from memory.tasks.steps import (
    fails_the_task,
    failure_code,
    finish_attempt,
    outage_code,
    record_step_failure,
    record_step_success,
    start_attempt,
    succeeded_step,
)
from memory.tasks.transitions import Transition, get_task, move

Transaction = Callable[[], AbstractContextManager[Session]]
"""Opens one tenant transaction (committed when the block ends)."""


@dataclass(frozen=True)
class StepRun:
    """Which step of which task, at which input version, and who tries it."""

    ref: TaskRef
    step_id: str
    next_step_id: str | None
    input_version: str
    expected_version: int
    goal: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    extra: dict[str, Any]
    temporal_attempt: int
    worker: str

    @property
    def key(self) -> str:
        return keys.step_key(self.ref.task_id, self.step_id, self.input_version)


@dataclass(frozen=True)
class Performed:
    """What a step produced: its output, and the artifacts whose bytes are already stored."""

    output: dict[str, Any]
    artifacts: list[ArtifactMeta]


@dataclass(frozen=True)
class StepResult:
    output: dict[str, Any]
    state_version: int
    replayed: bool
    """The step had already succeeded: this is its stored output, and nothing ran."""


class StepGaveUp(Exception):
    """The step failed :data:`~memory.tasks.steps.STEP_ATTEMPT_LIMIT` times on its own: its task fails."""

    def __init__(self, failures: int, cause: Exception) -> None:
        super().__init__(f"failed {failures} times ({type(cause).__name__})")
        self.failures = failures
        self.cause = cause


def run_attempt(transaction: Transaction, run: StepRun, perform: Callable[[], Performed]) -> StepResult:
    """Run the step once per (task, step, input version); a retry after its success returns the stored output.

    A failure is recorded, then raised as it came, except the one that uses up the step's attempts:
    :class:`StepGaveUp` (a :class:`~memory.tasks.contract.StepFailed` is always raised as itself)."""
    with transaction() as session:
        done = succeeded_step(session, run.ref.tenant_id, run.key)
        if done is not None and done.output is not None:
            task = get_task(session, run.ref.tenant_id, run.ref.task_id)
            return StepResult(done.output, task.state_version, replayed=True)
        attempt_id = _start(session, run).attempt_id
    try:
        performed = perform()
    except Exception as exc:
        outage = outage_code(exc)
        failures = _record_failure(transaction, run, attempt_id, exc, outage)
        if not isinstance(exc, StepFailed) and fails_the_task(failures, outage=outage):
            raise StepGaveUp(failures, exc) from exc
        raise
    return _record_success(transaction, run, attempt_id, performed)


def _start(session: Session, run: StepRun) -> TaskAttempt:
    return start_attempt(
        session,
        tenant_id=run.ref.tenant_id,
        task_id=run.ref.task_id,
        step_id=run.step_id,
        input_version=run.input_version,
        idempotency_key=run.key,
        temporal_attempt=run.temporal_attempt,
        input_digest=keys.digest({"goal": run.goal, "inputs": run.inputs, "extra": run.extra, "step": run.key}),
        worker=run.worker,
    )


def _record_failure(
    transaction: Transaction, run: StepRun, attempt_id: uuid.UUID, exc: Exception, outage: str | None
) -> int:
    """Mark the attempt and the step FAILED; how many of its attempts failed on their own. During an outage
    this transaction fails too, and the caller's retry records it later."""
    error = {"code": failure_code(exc, outage=outage), "message": str(exc)}
    tenant_id, task_id = run.ref.tenant_id, run.ref.task_id
    with transaction() as session:
        finish_attempt(session, tenant_id, attempt_id, status="FAILED", error=error)
        return record_step_failure(session, tenant_id, task_id, run.step_id, run.input_version)


def _record_success(transaction: Transaction, run: StepRun, attempt_id: uuid.UUID, performed: Performed) -> StepResult:
    """The attempt, the step's stored output and its artifacts, and the task's move to the next step: at once."""
    output_digest = keys.digest(performed.output)
    tenant_id, task_id = run.ref.tenant_id, run.ref.task_id
    with transaction() as session:
        finish_attempt(session, tenant_id, attempt_id, status="SUCCEEDED", output_digest=output_digest)
        add_artifacts(session, tenant_id, task_id, run.step_id, performed.artifacts)
        record_step_success(session, tenant_id, task_id, run.step_id, run.input_version, performed.output,
                            output_digest)
        snapshot = move(
            session,
            run.ref,
            Transition(
                expected_version=run.expected_version,
                transition_id=f"{run.key}:succeeded",
                target=TaskStatus.RUNNING,
                current_step_id=run.next_step_id,
                complete_step=run.step_id,
                checkpoint_reason=f"step_succeeded:{run.step_id}",
            ),
        )
        return StepResult(performed.output, snapshot.state_version, replayed=False)
