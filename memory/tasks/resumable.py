"""The caller's resumable tasks: what a RESUME_TASK recall without a task id chooses from (seed 003 §14.2).

Read from the read model (one indexed query, no Temporal call), so listing costs the same whether or not
Temporal is up; the one task chosen is then read live by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.tasks.models import Task
from memory.tasks.states import TERMINAL


@dataclass(frozen=True)
class ResumableTask:
    """A task its owner may resume: not terminal, as the read model last saw it."""

    task_id: str
    task_type: str
    status: str
    waiting_reason: str | None
    goal: dict[str, Any]
    updated_at: datetime

    @property
    def goal_summary(self) -> str:
        return goal_summary(self.goal)


def goal_summary(goal: dict[str, Any]) -> str:
    """The goal in one line (``currency CNY, month 2026-06``): enough for a person to tell two tasks apart."""
    return ", ".join(f"{name} {value}" for name, value in sorted(goal.items()))


def resumable_tasks(session: Session, tenant_id: str, user_id: str, limit: int) -> list[ResumableTask]:
    """``user_id``'s own non-terminal tasks, most recently changed first (at most ``limit``)."""
    rows = session.scalars(
        select(Task)
        .where(Task.tenant_id == tenant_id, Task.owner_user_id == user_id,
               Task.status.not_in([status.value for status in TERMINAL]))
        .order_by(Task.updated_at.desc(), Task.task_id)
        .limit(limit)
    )
    return [ResumableTask(t.task_id, t.task_type, t.status, t.waiting_reason, dict(t.goal), t.updated_at)
            for t in rows]
