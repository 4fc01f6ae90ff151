"""The step registry: (task type, step id) → implementation.

The implementations are looked up lazily, so importing the registry (as the worker does) does not
load matplotlib, and the workflow sandbox, which reads only :mod:`memory.reports.definitions`,
never does.
"""

from __future__ import annotations

from memory.reports.definitions import MONTHLY_REPORT
from memory.tasks.contract import StepFailed, StepFn


def _steps_of(task_type: str) -> dict[str, StepFn]:
    if task_type == MONTHLY_REPORT.task_type:
        from memory.reports import monthly  # lazily: it loads matplotlib

        return monthly.STEPS
    return {}


def implementation(task_type: str, step_id: str) -> StepFn:
    try:
        return _steps_of(task_type)[step_id]
    except KeyError:
        raise StepFailed("unknown_step", f"no implementation registered for {task_type}/{step_id}") from None
