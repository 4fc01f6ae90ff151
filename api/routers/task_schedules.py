"""Task schedules over HTTP: a named cron that starts a task of a registered type as its owner, in a timezone.

Rules in :mod:`memory.tasks.schedules` and :mod:`memory.tasks.schedule_store`, Temporal in
:mod:`api.services.task_schedules`; this module only translates HTTP.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status

from api.deps import CurrentPrincipal, EngineDep, SettingsDep, TemporalSource
from api.errors import Refused
from api.schemas.task_schedules import ScheduleIn, ScheduleListOut, ScheduleOut
from api.services import task_schedules
from memory.enums import Role
from memory.errors import Forbidden, InvalidInput

router = APIRouter(tags=["task schedules"])


@router.put(
    "/task-schedules/{name}",
    response_model=ScheduleOut,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": ScheduleOut, "description": "The caller's schedule existed: same body, or replaced"}},
)
async def put(
    name: str, body: ScheduleIn, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep,
    temporal: TemporalSource, response: Response,
) -> ScheduleOut:
    """Create (201) or replace (200) the caller's schedule; its tasks start as the caller's user. Refused (422) as
    ``POST /tasks`` would refuse its task (the goal with its placeholders resolved now), and for ``invalid_cron``,
    ``invalid_timezone``, ``unknown_placeholder``; another user's name is a 409 ``schedule_name_taken``."""
    try:
        shown, outcome = await task_schedules.put(temporal, engine, settings.task_queue, principal, name, body)
    except InvalidInput as exc:
        raise Refused.of(exc) from None
    if outcome != "created":
        response.status_code = status.HTTP_200_OK
    return shown


@router.get("/task-schedules", response_model=ScheduleListOut)
def list_all(
    principal: CurrentPrincipal, engine: EngineDep,
    owner: Annotated[Literal["me", "all"], Query(description="'all' needs the admin role")] = "me",
) -> ScheduleListOut:
    """The caller's schedules by name (every schedule of the tenant: ``owner=all``, admin)."""
    if owner == "all" and not principal.has(Role.ADMIN):
        raise Forbidden("listing every schedule of the tenant needs the admin role")
    return task_schedules.listing(engine, principal, owner == "all")


@router.get("/task-schedules/{name}", response_model=ScheduleOut)
async def get(name: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource) -> ScheduleOut:
    """The schedule, its last firing's outcome and its next fire times."""
    return await task_schedules.show(temporal, engine, principal, name)


@router.post("/task-schedules/{name}/pause", response_model=ScheduleOut)
async def pause(
    name: str, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep, temporal: TemporalSource
) -> ScheduleOut:
    """No firing starts a task until unpaused (a firing already under way checks the schedule and stops)."""
    return await task_schedules.set_paused(temporal, engine, settings.task_queue, principal, name, True)


@router.post("/task-schedules/{name}/unpause", response_model=ScheduleOut)
async def unpause(
    name: str, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep, temporal: TemporalSource
) -> ScheduleOut:
    """Fire again from the next fire time (missed ones are not made up)."""
    return await task_schedules.set_paused(temporal, engine, settings.task_queue, principal, name, False)


@router.delete("/task-schedules/{name}", status_code=204)
async def delete(name: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource) -> Response:
    """Remove the schedule and its timer; tasks it started run on."""
    await task_schedules.delete(temporal, engine, principal, name)
    return Response(status_code=204)
