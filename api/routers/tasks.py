"""Durable report tasks over HTTP: create, read, approve, control, resolve, and their artifacts and timeline.

Identity (tenant, user, roles) comes only from the API key; the workflow id
``task-{tenant}-{task}`` is built from the caller's tenant, so another tenant's
task is the same 404 as a missing one. Open tasks are read live from the
workflow (a query); closed tasks from the read model. The rules are elsewhere: who may do what in
:mod:`memory.identity.auth`, what a decision or a control request may do in ``memory.tasks`` (run by the
workflow's Update validators), the reads and actions in :mod:`api.services.task_reads` and
:mod:`api.services.task_actions`; this module only translates HTTP.

Temporal is reached through a :data:`~api.deps.TemporalSource` that connects only once the service's
read-model gate has passed: a colleague's task answers the 404 of a missing task at once, without
waiting on (or failing with) Temporal (issue 12, finding 11; ``tests/tasks/test_task_oracle.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status

from api.deps import ArtifactsDep, CurrentPrincipal, EngineDep, SettingsDep, TemporalSource
from api.errors import Refused
from api.responses import artifact_response
from api.schemas.tasks import (
    ControlIn,
    DecisionIn,
    DecisionOut,
    OperationOut,
    PublicationListOut,
    ResolveIn,
    SampleDataIn,
    SampleDataOut,
    TaskCreatedOut,
    TaskCreateIn,
    TaskListOut,
    TaskView,
    TimelineOut,
)
from api.services import task_actions, task_reads
from memory.db import tenant_session
from memory.errors import Forbidden, InvalidInput
from memory.identity.auth import may_operate, may_read_every_task
from memory.reports.sales import seed_sales
from memory.tasks.timeline import list_tasks as read_task_list

router = APIRouter(tags=["tasks"])
# Task views are answered with response_model_exclude_unset: a view holds the fields its source has
# (the live workflow or the read model; see api.schemas.tasks).


@router.post(
    "/tasks",
    status_code=status.HTTP_201_CREATED,
    response_model=TaskCreatedOut,
    responses={
        200: {"model": TaskCreatedOut, "description": "A replay of the same request_intent_id: the task it started"}
    },
)
async def create_task(
    body: TaskCreateIn, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep,
    temporal: TemporalSource, response: Response,
) -> TaskCreatedOut:
    """Start a task of a registered type. The same (user, request_intent_id) always names the same task (200 on
    replay). A goal its type's schema refuses is a 422 naming each problem (``fields``, ``details.problems``)."""
    try:
        created = await task_actions.create_task(temporal, engine, settings.task_queue, principal, body)
    except InvalidInput as exc:
        raise Refused.of(exc) from None
    if created.replayed:
        response.status_code = status.HTTP_200_OK
    return created


@router.get("/tasks", response_model=TaskListOut, response_model_exclude_unset=True)
def list_tasks(
    principal: CurrentPrincipal,
    engine: EngineDep,
    owner: Annotated[
        Literal["me", "all"], Query(description="'all' needs the approver, operator or auditor role")
    ] = "me",
    task_status: Annotated[str | None, Query(alias="status", pattern=r"^[A-Z_]{3,32}$")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> TaskListOut:
    """Tasks from the read model, most recently changed first: by default the caller's own."""
    if owner == "all" and not may_read_every_task(principal.roles):
        raise Forbidden("listing every task of the tenant needs the approver, operator or auditor role")
    with tenant_session(engine, principal.tenant_id) as session:
        rows = read_task_list(
            session,
            principal.tenant_id,
            owner_user_id=principal.user_id if owner == "me" else None,
            status=task_status,
            limit=limit,
        )
        return TaskListOut(items=[TaskView.row(row) for row in rows])


@router.get("/tasks/{task_id}", response_model=TaskView, response_model_exclude_unset=True)
async def get_task(task_id: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource) -> TaskView:
    """Live state from the workflow while it runs; the read model once it has closed."""
    return await task_reads.get_task(temporal, engine, principal, task_id)


@router.post("/tasks/{task_id}/approvals", response_model=DecisionOut)
async def decide(
    task_id: str, body: DecisionIn, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource
) -> DecisionOut:
    """Approve or reject the current draft, bound to its sha256 and the task's state_version."""
    return await task_actions.decide(temporal, engine, principal, task_id, body)


@router.post("/tasks/{task_id}/pause", response_model=TaskView, response_model_exclude_unset=True)
async def pause(
    task_id: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource,
    body: ControlIn | None = None,
) -> TaskView:
    """Pause at the next step boundary (the running step finishes first)."""
    return await task_actions.control(temporal, engine, principal, task_id, "pause", body)


@router.post("/tasks/{task_id}/resume", response_model=TaskView, response_model_exclude_unset=True)
async def resume(
    task_id: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource,
    body: ControlIn | None = None,
) -> TaskView:
    return await task_actions.control(temporal, engine, principal, task_id, "resume", body)


@router.post("/tasks/{task_id}/cancel", response_model=TaskView, response_model_exclude_unset=True)
async def cancel(
    task_id: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource,
    body: ControlIn | None = None,
) -> TaskView:
    """Cancel; answers once the task is CANCELLED. Refused while a publication's outcome is unknown."""
    return await task_actions.control(temporal, engine, principal, task_id, "cancel", body)


@router.post("/tasks/{task_id}/operations/{operation_id}/resolve", response_model=OperationOut)
async def resolve(
    task_id: str, operation_id: str, body: ResolveIn, principal: CurrentPrincipal, engine: EngineDep,
    temporal: TemporalSource,
) -> OperationOut:
    """An operator's verdict on a side effect whose outcome stayed unknown after reconciliation."""
    return await task_actions.resolve(temporal, engine, principal, task_id, operation_id, body)


@router.get("/tasks/{task_id}/artifacts/{sha256}")
def get_artifact(
    task_id: str, sha256: str, principal: CurrentPrincipal, engine: EngineDep, store: ArtifactsDep
) -> Response:
    """The artifact's bytes, if this task in the caller's tenant produced them, streamed from the artifact store."""
    return artifact_response(sha256, *task_reads.open_artifact(engine, store, principal, task_id, sha256))


@router.get("/tasks/{task_id}/publications", response_model=PublicationListOut)
def list_publications(task_id: str, principal: CurrentPrincipal, engine: EngineDep) -> PublicationListOut:
    """Where the task's approved artifact was published; an archive's url serves it to whoever may read the task."""
    return task_reads.publications(engine, principal, task_id)


@router.get("/tasks/{task_id}/timeline", response_model=TimelineOut)
async def timeline(
    task_id: str, principal: CurrentPrincipal, engine: EngineDep, temporal: TemporalSource
) -> TimelineOut:
    """Attempts, checkpoints, approvals, reminders and operations merged in time order."""
    return await task_reads.timeline(temporal, engine, principal, task_id)


@router.post("/report-data/sample", response_model=SampleDataOut)
def seed_sample_data(principal: CurrentPrincipal, engine: EngineDep, body: SampleDataIn | None = None) -> SampleDataOut:
    """Load the deterministic sample sales dataset into the caller's tenant, once (operator role)."""
    if not may_operate(principal.roles):
        raise Forbidden("loading sample sales data needs the operator role")
    body = body or SampleDataIn()
    with tenant_session(engine, principal.tenant_id) as session:
        lines = seed_sales(session, principal.tenant_id, total=body.lines, seed=body.seed)
    return SampleDataOut(tenant_lines=lines)
