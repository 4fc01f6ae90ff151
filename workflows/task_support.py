"""The task workflow's policies and the small rules it applies around its activities.

Kept apart from :mod:`workflows.report_task` (the state machine) so that the workflow reads as its steps.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from memory.errors import MnemoError
    from memory.tasks.live import TaskState

DEFINITIONS_PATCH = "task-definitions-v1"
"""Runs that started before definitions were pinned replay without what came with them (artifacts by name, kinds
other than the monthly report's, the end-of-steps check)."""
REMINDER_DELIVERY_PATCH = "deliver-reminders-to-webhook"
"""Workflows that sent reminders before delivery existed replay without it (their history has no such activity)."""
MAX_REVISIONS = 5


class TaskFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def refuse(code: str, message: str) -> ApplicationError:
    """A validator refusal: the caller gets ``code`` back; the workflow is untouched."""
    return ApplicationError(message, type=code, non_retryable=True)


R = TypeVar("R")


def judge(rule: Callable[[TaskState | None, R], None], live: TaskState | None, request: R) -> None:
    """Apply a ``memory.tasks`` rule to the live state; its refusal goes back to the caller as its code."""
    try:
        rule(live, request)
    except MnemoError as refusal:
        raise refuse(refusal.code, refusal.message) from None


def cause_code(exc: ActivityError) -> tuple[str, str]:
    """The task's ``error`` for a failed activity. A refusal the activity raised on purpose (non-retryable)
    says what it means; anything else is an exception nobody expected, whose text may hold SQL, its
    parameters or content: the task names only its type (the worker's log has the traceback)."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        if cause.non_retryable:
            return cause.type or "activity_failed", cause.message
        return "activity_failed", (
            f"the {exc.activity_type or 'activity'} step failed unexpectedly ({cause.type or 'error'}) "
            "and ran out of retries; the worker's log has the details"
        )
    return "activity_failed", str(cause or exc)


WRITE_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=60),
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=10),
}
DELIVERY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                             maximum_interval=timedelta(minutes=5))


def step_options(heartbeat_seconds: float, retry_max_interval_seconds: float,
                 timeout_seconds: float | None = None) -> dict[str, Any]:
    """A producing step's activity options. No attempt limit: run_step fails for good after STEP_ATTEMPT_LIMIT
    failures of the step itself, while attempts that met an unreachable database go on until it is back.
    ``timeout_seconds``: the definition's limit on one attempt of the step (default 10 minutes)."""
    return {
        "start_to_close_timeout": timedelta(seconds=timeout_seconds) if timeout_seconds else timedelta(minutes=10),
        "heartbeat_timeout": timedelta(seconds=heartbeat_seconds),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(milliseconds=500),
            maximum_interval=timedelta(seconds=max(0.5, retry_max_interval_seconds)),
            maximum_attempts=0,
        ),
    }
