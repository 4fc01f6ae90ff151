"""A tenant's task schedules as rows: the registry (listing and every firing read it; Temporal holds the timer).

Who: any of the tenant's own keys puts a schedule, and owns it: its tasks start as that key's user, whoever asks
later. The owner, and an admin, see, pause, resume and delete it; to anyone else it is a missing one (404). Names
are the tenant's: another user's name is taken (409 ``schedule_name_taken``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from memory.enums import Role
from memory.errors import Conflict, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry
from memory.tasks import keys
from memory.tasks.goals import check_goal
from memory.tasks.models import TaskSchedule
from memory.tasks.resolve import resolve_definition
from memory.tasks.schedules import fire_intent, resolve_goal

Outcome = Literal["created", "unchanged", "updated"]


@dataclass(frozen=True)
class ScheduleBody:
    task_type: str
    goal: dict[str, Any]
    cron: str
    timezone: str


def _body(row: TaskSchedule) -> ScheduleBody:
    return ScheduleBody(row.task_type, row.goal, row.cron, row.timezone)


def visible(session: Session, principal: PrincipalContext, name: str) -> TaskSchedule:
    """The schedule the caller may see and act on: their own, or any of the tenant's for an admin; else 404."""
    row = session.get(TaskSchedule, (principal.tenant_id, name))
    if row is None or (row.owner_user_id != principal.user_id and not principal.has(Role.ADMIN)):
        raise NotFound(f"task schedule {name!r} does not exist")
    return row


def own(session: Session, principal: PrincipalContext, name: str, *, lock: bool = False) -> TaskSchedule | None:
    """The caller's own schedule of that name, None if the name is free; another user's is a 409."""
    row = session.get(TaskSchedule, (principal.tenant_id, name), with_for_update=lock)
    if row is not None and row.owner_user_id != principal.user_id:
        raise Conflict(f"the schedule name {name!r} is taken by another user of your tenant; choose another name",
                       code="schedule_name_taken", details={"name": name})
    return row


def put(session: Session, principal: PrincipalContext, name: str, body: ScheduleBody) -> tuple[TaskSchedule, Outcome]:
    """Create or replace the caller's schedule: the row and ``created``, ``unchanged`` (the same body again) or
    ``updated``. The paused flag and the last firing's outcome are kept across a replacement."""
    row = own(session, principal, name, lock=True)
    if row is not None and _body(row) == body:
        return row, "unchanged"
    outcome: Outcome = "created" if row is None else "updated"
    if row is None:
        row = TaskSchedule(tenant_id=principal.tenant_id, name=name, owner_user_id=principal.user_id, paused=False)
        session.add(row)
    row.task_type, row.goal, row.cron, row.timezone = body.task_type, body.goal, body.cron, body.timezone
    row.updated_at = func.now()
    session.add(AuditEntry(tenant_id=principal.tenant_id, actor=principal.user_id, action="TASK_SCHEDULE_SET",
                           detail={"name": name, "task_type": body.task_type, "cron": body.cron,
                                   "timezone": body.timezone, "key_id": principal.key_id}))
    session.flush()
    session.refresh(row)
    return row, outcome


def listing(session: Session, principal: PrincipalContext, *, every_owner: bool) -> list[TaskSchedule]:
    query = select(TaskSchedule).where(TaskSchedule.tenant_id == principal.tenant_id).order_by(TaskSchedule.name)
    if not every_owner:
        query = query.where(TaskSchedule.owner_user_id == principal.user_id)
    return list(session.scalars(query))


def set_paused(session: Session, principal: PrincipalContext, name: str, paused: bool) -> TaskSchedule:
    row = visible(session, principal, name)
    if row.paused != paused:
        row.paused, row.updated_at = paused, func.now()
        session.add(AuditEntry(tenant_id=principal.tenant_id, actor=principal.user_id,
                               action="TASK_SCHEDULE_PAUSED" if paused else "TASK_SCHEDULE_UNPAUSED",
                               detail={"name": name, "key_id": principal.key_id}))
        session.flush()
        session.refresh(row)
    return row


def remove(session: Session, principal: PrincipalContext, name: str) -> None:
    visible(session, principal, name)
    session.execute(delete(TaskSchedule).where(TaskSchedule.tenant_id == principal.tenant_id,
                                               TaskSchedule.name == name))
    session.add(AuditEntry(tenant_id=principal.tenant_id, actor=principal.user_id, action="TASK_SCHEDULE_REMOVED",
                           detail={"name": name, "key_id": principal.key_id}))


@dataclass(frozen=True)
class Firing:
    """The task one firing starts, as its owner, on the definition current at the fire time."""

    task_id: str
    owner_user_id: str
    task_type: str
    goal: dict[str, Any]
    request_intent_id: str
    definition: dict[str, Any]


def firing(session: Session, tenant_id: str, name: str, fire_time: datetime) -> Firing | None:
    """What the firing at ``fire_time`` starts; None while the row is paused or gone (the row is the registry,
    whatever Temporal's own state). A type removed since, or a goal its schema now refuses, raises its 422."""
    row = session.get(TaskSchedule, (tenant_id, name))
    if row is None or row.paused:
        return None
    definition = resolve_definition(session, tenant_id, row.task_type)
    goal = resolve_goal(row.goal, fire_time, row.timezone)
    check_goal(definition, goal)
    intent = fire_intent(name, fire_time)
    return Firing(keys.task_id_for(tenant_id, row.owner_user_id, intent), row.owner_user_id, row.task_type, goal,
                  intent, dict(definition.body))


def record_firing(
    session: Session, tenant_id: str, name: str, fired_at: datetime, task_id: str | None,
    error: dict[str, Any] | None,
) -> None:
    """The last firing's outcome, shown by ``GET /task-schedules/{name}``."""
    session.execute(update(TaskSchedule).where(TaskSchedule.tenant_id == tenant_id, TaskSchedule.name == name)
                    .values(last_fired_at=fired_at, last_task_id=task_id, last_error=error))
