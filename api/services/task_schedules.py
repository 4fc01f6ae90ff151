"""Task schedules: the row (:mod:`memory.tasks.schedule_store`, the registry) and its Temporal Schedule (the timer).

Temporal follows the row: every write puts the Schedule in the row's shape (:func:`_sync`), so a write that
failed halfway is healed by the same request again. A PUT asks Temporal first (a refusal leaves no row); pause
and unpause write the row first (a firing reads it, so a pause takes effect at once); DELETE removes the
Schedule, then the row.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from api.schemas.task_schedules import ScheduleIn, ScheduleListOut, ScheduleOut
from api.services.client import ClientSource, TemporalUnavailable
from api.services.task_actions import definition_for
from memory.db import tenant_session
from memory.errors import InvalidInput
from memory.identity.auth import PrincipalContext
from memory.tasks import schedule_store, schedules
from memory.tasks.goals import check_goal
from memory.tasks.models import TaskSchedule
from workflows import search_attributes
from workflows.fairness import tenant_priority
from workflows.scheduled_task import ScheduledStart, ScheduledTaskWorkflow, schedule_id

CATCHUP = timedelta(hours=1)
"""A firing missed while Temporal was down still happens within this long; later ones are skipped."""
NEXT_FIRES = 3

def _body(body: ScheduleIn) -> schedule_store.ScheduleBody:
    return schedule_store.ScheduleBody(body.task_type, body.goal, body.cron, body.timezone)


def check(engine: Engine, tenant_id: str, body: ScheduleIn) -> None:
    """What POST /tasks would refuse of the firing's task, refused now: the cron, the zone, the placeholders, the
    type, and the goal with its placeholders resolved as a firing at this moment would."""
    schedules.check_cron(body.cron)
    schedules.zone(body.timezone)
    schedules.check_placeholders(body.goal)
    definition = definition_for(engine, tenant_id, body.task_type)
    check_goal(definition, schedules.resolve_goal(body.goal, datetime.now(UTC), body.timezone))


def _schedule(task_queue: str, row: TaskSchedule) -> Schedule:
    start = ScheduledStart(row.tenant_id, row.name)
    return Schedule(
        action=ScheduleActionStartWorkflow(
            ScheduledTaskWorkflow.run, start, id=f"task-schedule-run-{row.tenant_id}-{row.name}",
            task_queue=task_queue, priority=tenant_priority(row.tenant_id),
            typed_search_attributes=TypedSearchAttributes([SearchAttributePair(search_attributes.TENANT,
                                                                               row.tenant_id)]),
        ),
        spec=ScheduleSpec(cron_expressions=[row.cron], time_zone_name=row.timezone),
        # Firings of different fire times are different tasks: none waits for another.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL, catchup_window=CATCHUP),
        state=ScheduleState(paused=row.paused),
    )


def _unavailable(exc: RPCError, what: str) -> TemporalUnavailable:
    return TemporalUnavailable(f"Temporal could not {what} the schedule: {exc.message}")


async def _sync(client: Client, task_queue: str, row: TaskSchedule) -> None:
    """Create the Schedule, or replace it, in the row's shape (its cron, zone and paused flag)."""
    schedule = _schedule(task_queue, row)
    try:
        try:
            await client.create_schedule(schedule_id(row.tenant_id, row.name), schedule)
        except ScheduleAlreadyRunningError:
            await client.get_schedule_handle(schedule_id(row.tenant_id, row.name)).update(
                lambda _: ScheduleUpdate(schedule=schedule))
    except RPCError as exc:
        if exc.status == RPCStatusCode.INVALID_ARGUMENT:  # what our own checks let through and Temporal does not
            raise InvalidInput(f"Temporal refused the schedule ({exc.message}); check its cron and timezone",
                               code="schedule_refused", details={"field": "cron"}) from exc
        raise _unavailable(exc, "write") from exc


def _owned(engine: Engine, principal: PrincipalContext, name: str) -> TaskSchedule | None:
    with tenant_session(engine, principal.tenant_id) as session:
        row = schedule_store.own(session, principal, name)
        if row is not None:
            session.expunge(row)
        return row


async def put(
    temporal: ClientSource, engine: Engine, task_queue: str, principal: PrincipalContext, name: str, body: ScheduleIn
) -> tuple[ScheduleOut, schedule_store.Outcome]:
    """Create or replace the caller's schedule; its tasks will start as the caller's user."""
    schedules.check_name(name)
    await run_in_threadpool(check, engine, principal.tenant_id, body)
    before = await run_in_threadpool(_owned, engine, principal, name)
    planned = TaskSchedule(tenant_id=principal.tenant_id, name=name, owner_user_id=principal.user_id,
                           task_type=body.task_type, goal=body.goal, cron=body.cron, timezone=body.timezone,
                           paused=before.paused if before is not None else False)
    await _sync(await temporal(), task_queue, planned)

    def write() -> tuple[ScheduleOut, schedule_store.Outcome]:
        with tenant_session(engine, principal.tenant_id) as session:
            row, outcome = schedule_store.put(session, principal, name, _body(body))
            return ScheduleOut.row(row), outcome

    return await run_in_threadpool(write)


def listing(engine: Engine, principal: PrincipalContext, every_owner: bool) -> ScheduleListOut:
    with tenant_session(engine, principal.tenant_id) as session:
        rows = schedule_store.listing(session, principal, every_owner=every_owner)
        return ScheduleListOut(items=[ScheduleOut.row(row) for row in rows])


def _visible(engine: Engine, principal: PrincipalContext, name: str) -> ScheduleOut:
    with tenant_session(engine, principal.tenant_id) as session:
        return ScheduleOut.row(schedule_store.visible(session, principal, name))


async def show(temporal: ClientSource, engine: Engine, principal: PrincipalContext, name: str) -> ScheduleOut:
    """The row (404 before Temporal is asked) and the next fire times Temporal has planned (none while paused)."""
    shown = await run_in_threadpool(_visible, engine, principal, name)
    client = await temporal()
    try:
        described = await client.get_schedule_handle(schedule_id(principal.tenant_id, name)).describe()
        upcoming = [] if shown.paused else [t.isoformat() for t in described.info.next_action_times[:NEXT_FIRES]]
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise _unavailable(exc, "describe") from exc
        upcoming = []  # the timer is missing (a write failed halfway): the next PUT or pause puts it back
    return shown.model_copy(update={"next_fire_times": upcoming})


async def set_paused(
    temporal: ClientSource, engine: Engine, task_queue: str, principal: PrincipalContext, name: str, paused: bool
) -> ScheduleOut:
    def write() -> tuple[ScheduleOut, TaskSchedule]:
        with tenant_session(engine, principal.tenant_id) as session:
            row = schedule_store.set_paused(session, principal, name, paused)
            session.expunge(row)
            return ScheduleOut.row(row), row

    shown, row = await run_in_threadpool(write)
    await _sync(await temporal(), task_queue, row)
    return shown


async def delete(temporal: ClientSource, engine: Engine, principal: PrincipalContext, name: str) -> None:
    await run_in_threadpool(_visible, engine, principal, name)
    client = await temporal()
    try:
        await client.get_schedule_handle(schedule_id(principal.tenant_id, name)).delete()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise _unavailable(exc, "delete") from exc

    def remove() -> None:
        with tenant_session(engine, principal.tenant_id) as session:
            schedule_store.remove(session, principal, name)

    await run_in_threadpool(remove)
