"""Request and response bodies of ``/task-schedules``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from api.schemas.common import StrictRequest
from memory.tasks.models import TaskSchedule


class ScheduleIn(StrictRequest):
    task_type: Annotated[str, Field(max_length=63, description="A registered task type", examples=["monthly-report"])]
    goal: dict[str, Any] = Field(
        description="Checked against the type's goal schema. A string may hold {{fire.previous_month}} (YYYY-MM "
        "of the month before the fire time) or {{fire.date}} (YYYY-MM-DD), resolved in the schedule's timezone "
        "at each firing", examples=[{"month": "{{fire.previous_month}}", "currency": "CNY"}])
    cron: Annotated[str, Field(min_length=1, max_length=200, description="Five fields: minute hour day-of-month "
                                                                          "month day-of-week", examples=["0 9 1 * *"])]
    timezone: Annotated[str, Field(min_length=1, max_length=64, description="An IANA timezone name",
                                   examples=["Asia/Shanghai"])]


class ScheduleOut(BaseModel):
    name: str
    owner_user_id: str
    task_type: str
    goal: dict[str, Any]
    cron: str
    timezone: str
    paused: bool
    created_at: str
    updated_at: str
    last_fired_at: str | None = Field(default=None, description="The last firing's nominal time")
    last_task_id: str | None = Field(default=None, description="The task the last firing started")
    last_error: dict[str, Any] | None = Field(default=None, description="Why the last firing started no task")
    next_fire_times: list[str] | None = Field(
        default=None, description="The next three fire times, from Temporal (single schedule reads only)")

    @classmethod
    def row(cls, row: TaskSchedule, next_fire_times: list[str] | None = None) -> ScheduleOut:
        return cls(
            name=row.name, owner_user_id=row.owner_user_id, task_type=row.task_type, goal=row.goal, cron=row.cron,
            timezone=row.timezone, paused=row.paused, created_at=row.created_at.isoformat(),
            updated_at=row.updated_at.isoformat(),
            last_fired_at=row.last_fired_at.isoformat() if row.last_fired_at else None,
            last_task_id=row.last_task_id, last_error=row.last_error, next_fire_times=next_fire_times,
        )


class ScheduleListOut(BaseModel):
    items: list[ScheduleOut]
