"""The ``task`` resource: durable tasks from their read model (``tasks``), read under the rules of the task
routes: a task is its owner's, and a key that may read every task of the tenant
(:func:`memory.identity.auth.may_read_every_task`: approvers, operators, auditors) reads them all, as
``GET /tasks/{id}`` lets it. Anyone else's task is as absent as a missing one.

The read model is what a task has settled; a running workflow may be a step ahead (``GET /tasks/{id}``
asks it). Its timeline is summarised as counts, its publication as the latest publish operation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, func, select, true
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

from memory.identity.auth import may_read_every_task
from memory.resources.access import Access, Grant
from memory.resources.adapters.common import (
    Columns,
    TableSource,
    filter_conditions,
    match_rows,
    present,
    stamp,
)
from memory.resources.sources import (
    Candidate,
    FilterClause,
    Lineage,
    Position,
    Query,
    RowState,
    SourceRow,
    newest_first,
)
from memory.tasks.models import Task, TaskApproval, TaskAttempt, TaskCheckpoint, TaskOperation
from memory.tasks.resumable import goal_summary
from memory.tasks.states import TERMINAL, TaskStatus

PUBLISH = "publish"
FAILED = "FAILED"

COLUMNS: Columns = {"/status": Task.status, "/task_type": Task.task_type, "/updated_at": Task.updated_at}
LINEAGE = Lineage(state=("/status",), updated_at=("/updated_at",), version=("/state_version",))
"""What a row's state, time of change and version come from."""


def readable_tasks(access: Access) -> ColumnElement[bool]:
    principal = access.principal
    owner = true() if may_read_every_task(principal.roles) else Task.owner_user_id == principal.user_id
    return and_(Task.tenant_id == principal.tenant_id, owner)


def title_of(task: Task) -> str:
    """The type and the goal, which together say what a task is for (``monthly-report (currency CNY, month …)``)."""
    goal = goal_summary(task.goal)
    return f"{task.task_type} ({goal})" if goal else task.task_type


def data_of(task: Task, timeline: dict[str, int] | None = None, publication: dict[str, str] | None = None
            ) -> dict[str, Any]:
    """The task as the ``task`` declaration names it; without ``timeline`` only what its own row holds."""
    error = task.error or {}
    return present(
        title=title_of(task), task_type=task.task_type, status=task.status, waiting_reason=task.waiting_reason,
        current_step=task.current_step_id, completed_steps=list(task.completed_step_ids),
        state_version=task.state_version, destination=task.destination,
        error=present(code=error.get("code"), message=error.get("message")) or None,
        timeline=timeline, publication=publication,
        created_at=stamp(task.created_at), updated_at=stamp(task.updated_at),
    )


@dataclass
class TaskSource(TableSource):
    columns = COLUMNS

    def page(self, session: Session, access: Access, grant: Grant, filters: Sequence[FilterClause],
             after: Position | None, limit: int) -> list[SourceRow]:
        statement = newest_first(select(Task).where(readable_tasks(access), *filter_conditions(self.columns, filters)),
                                 Task.updated_at, Task.task_id, after, limit, grant=grant, lineage=LINEAGE)
        return self._rows(session, list(session.execute(statement).scalars()))

    def match(self, session: Session, access: Access, grant: Grant, query: Query, limit: int) -> list[Candidate]:
        # No projection: the readable tasks are read and their search fields (all on the task's row) matched.
        tasks = session.execute(select(Task).where(readable_tasks(access))).scalars()
        return match_rows(session, self.declaration, grant, query.terms,
                          [(task.task_id, data_of(task)) for task in tasks], limit)

    def fetch(self, session: Session, access: Access, grant: Grant, ids: Sequence[str], *,
              whole: bool = False) -> Mapping[str, SourceRow]:
        del grant, whole  # a task has no long field
        if not ids:
            return {}
        tasks = list(session.execute(select(Task).where(readable_tasks(access), Task.task_id.in_(list(ids)))).scalars())
        return {row.record_id: row for row in self._rows(session, tasks)}

    def _rows(self, session: Session, tasks: list[Task]) -> list[SourceRow]:
        if not tasks:
            return []
        tenant_id, ids = tasks[0].tenant_id, [task.task_id for task in tasks]
        timelines = _timelines(session, tenant_id, ids)
        publications = _publications(session, tenant_id, ids)
        return [
            SourceRow(resource=self.resource, record_id=task.task_id, version=task.state_version,
                      updated_at=task.updated_at,
                      data=data_of(task, timelines[task.task_id], publications.get(task.task_id)),
                      state=RowState.CLOSED if TaskStatus(task.status) in TERMINAL else RowState.OPEN,
                      lineage=LINEAGE)
            for task in tasks
        ]


def _counts(session: Session, tenant_id: str, ids: list[str], model: Any) -> dict[str, int]:
    rows = session.execute(
        select(model.task_id, func.count()).where(model.tenant_id == tenant_id, model.task_id.in_(ids))
        .group_by(model.task_id)
    )
    return {task_id: int(count) for task_id, count in rows}


def _timelines(session: Session, tenant_id: str, ids: list[str]) -> dict[str, dict[str, int]]:
    """Per task, how many attempts (and failed ones), checkpoints, approvals and operations it has had."""
    failed = session.execute(
        select(TaskAttempt.task_id, func.count()).where(TaskAttempt.tenant_id == tenant_id,
                                                         TaskAttempt.task_id.in_(ids), TaskAttempt.status == FAILED)
        .group_by(TaskAttempt.task_id)
    )
    failed_counts = {task_id: int(count) for task_id, count in failed}
    counts = {name: _counts(session, tenant_id, ids, model) for name, model in
              (("attempts", TaskAttempt), ("checkpoints", TaskCheckpoint), ("approvals", TaskApproval),
               ("operations", TaskOperation))}
    return {task_id: {"attempts": counts["attempts"].get(task_id, 0),
                      "failed_attempts": failed_counts.get(task_id, 0),
                      "checkpoints": counts["checkpoints"].get(task_id, 0),
                      "approvals": counts["approvals"].get(task_id, 0),
                      "operations": counts["operations"].get(task_id, 0)}
            for task_id in ids}


def _publications(session: Session, tenant_id: str, ids: list[str]) -> dict[str, dict[str, str]]:
    """Per task that has one, its latest publish operation: status, destination, and where it landed if known."""
    latest = session.execute(
        select(TaskOperation)
        .where(TaskOperation.tenant_id == tenant_id, TaskOperation.task_id.in_(ids), TaskOperation.kind == PUBLISH)
        .ext(distinct_on(TaskOperation.task_id))
        .order_by(TaskOperation.task_id, TaskOperation.created_at.desc(), TaskOperation.operation_id.desc())
    ).scalars()
    return {op.task_id: present(status=op.status, destination=op.destination, publication_id=op.publication_id,
                                location=op.location)
            for op in latest}

