"""Pause, resume and cancel: who may, when, and what a cancel stops.

The workflow's Update validators call these on its live state, so a refused request is answered to
its caller and the workflow is untouched. A cancel is refused while a publication is in flight or
its outcome is unknown (:func:`check_cancel`); once accepted, it stops the next publish attempt
before anything is sent (:func:`may_send_publication`), and a task between steps ends at the next
step boundary.
"""

from __future__ import annotations

from memory.errors import Conflict, Forbidden
from memory.identity.auth import may_control_task
from memory.tasks.live import ControlRequest, TaskState
from memory.tasks.states import TERMINAL, TaskStatus

S = TaskStatus
UNSETTLED = ("PENDING", "UNKNOWN_OUTCOME")
"""Operation statuses that block a cancel: something may have been sent."""


def check_control(live: TaskState | None, request: ControlRequest) -> TaskState:
    """What every control request needs: a started, open task, and its owner or an operator."""
    if live is None:
        raise Conflict("the task has not started yet; try again in a moment", code="not_started")
    if not may_control_task(request.user_id, request.roles, live.owner_user_id):
        raise Forbidden("only the task's owner or an operator can control it")
    if live.status in {s.value for s in TERMINAL}:
        raise Conflict(f"the task already ended ({live.status})", code="task_closed")
    return live


def check_pause(live: TaskState | None, request: ControlRequest) -> None:
    task = check_control(live, request)
    if task.status not in (S.CREATED.value, S.READY.value, S.RUNNING.value):
        raise Conflict(f"a task in {task.status} cannot be paused", code="illegal_transition")


def check_resume(live: TaskState | None, request: ControlRequest) -> None:
    task = check_control(live, request)
    if task.status != S.PAUSED.value and not task.pause_requested:
        raise Conflict(f"a task in {task.status} is not paused", code="illegal_transition")


def check_cancel(live: TaskState | None, request: ControlRequest) -> None:
    task = check_control(live, request)
    if any(op.status in UNSETTLED for op in task.operations):
        raise Conflict(
            "a publication is in flight or its outcome is unknown; resolve it before cancelling",
            code="operation_unresolved",
        )


def may_send_publication(*, cancel_requested: bool) -> bool:
    """Before each publish attempt: a cancel accepted between attempts (nothing was in flight, see
    :func:`check_cancel`) wins over the next send, so a cancelled task never publishes afterwards."""
    return not cancel_requested
