"""The one activity of a schedule's firing: what task it starts (the rules: :mod:`memory.tasks.schedule_store`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from temporalio import activity

from activities.db import shielded_session
from activities.tasks.base import refusal
from memory.errors import MnemoError
from memory.tasks.schedule_store import Firing, firing, record_firing


@dataclass(frozen=True)
class FireInput:
    tenant_id: str
    name: str
    fire_time: str
    """The nominal fire time, ISO 8601 with its offset."""


class ScheduleActivities:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @activity.defn(name="task_schedule_fire")
    def fire(self, req: FireInput) -> Firing | None:
        """The task this firing starts (None: the schedule is paused or gone), recorded as the last firing's
        outcome; a refusal (the type gone, the goal no longer valid) is recorded too, and fails the firing."""
        fire_time = datetime.fromisoformat(req.fire_time)
        try:
            with shielded_session(self.engine, req.tenant_id) as session:
                found = firing(session, req.tenant_id, req.name, fire_time)
                if found is not None:
                    record_firing(session, req.tenant_id, req.name, fire_time, found.task_id, None)
        except MnemoError as exc:
            with shielded_session(self.engine, req.tenant_id) as session:
                record_firing(session, req.tenant_id, req.name, fire_time, None,
                              {"code": exc.code, "message": exc.message})
            raise refusal(exc) from exc
        return found

    def all(self) -> list[Callable[..., Any]]:
        return [self.fire]
