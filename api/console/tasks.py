"""Tasks: the list with filters, a task's page (timeline, Temporal link, operator actions behind a
confirmation), its artifacts and its published report. Every read and action is the API's own service
(:mod:`api.services.task_reads`, :mod:`api.services.task_actions`)."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from api.console import drafts
from api.console.web import CheckedForm, ConsoleRoute, SignedIn, back_to, outcome, page
from api.deps import ArtifactsDep, EngineDep, SettingsDep, TemporalSource
from api.responses import artifact_response
from api.schemas.tasks import ControlIn, ResolveIn
from api.services import task_actions, task_reads
from api.services.task_actions import Control
from memory.db import tenant_session
from memory.errors import InvalidInput, NotFound
from memory.identity.auth import may_control_task, may_operate, may_read_every_task
from memory.tasks.approvals import decider_refusal
from memory.tasks.states import TERMINAL, TaskStatus
from memory.tasks.timeline import list_tasks

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)
Filter = Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_-]{0,64}$")]
SAFE_ARTIFACT_HEADERS = {
    # A draft or report is the worker's HTML: opened as a document of its own, it may run no script and load
    # nothing but its embedded images (the draft's frame on the task page is sandboxed as well); only the
    # console's own task page may frame it (every other console response may be framed by no one).
    "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
}


def temporal_link(ui_url: str, namespace: str, workflow_id: str, run_id: str | None) -> str | None:
    if not ui_url:
        return None
    base = f"{ui_url.rstrip('/')}/namespaces/{namespace}/workflows/{workflow_id}"
    return f"{base}/{run_id}/history" if run_id else base


@router.get("/tasks")
def task_list(
    request: Request,
    signed: SignedIn,
    engine: EngineDep,
    status: Filter = None,
    waiting_reason: Filter = None,
    task_type: Filter = None,
) -> HTMLResponse:
    """The caller's own tasks; every task of the tenant for approvers, operators and auditors (as the API)."""
    principal = signed.principal
    every = may_read_every_task(principal.roles)
    with tenant_session(engine, principal.tenant_id) as session:
        rows = list_tasks(
            session, principal.tenant_id, owner_user_id=None if every else principal.user_id,
            status=status or None, waiting_reason=waiting_reason or None, task_type=task_type or None, limit=200,
        )
    filters = {"status": status or "", "waiting_reason": waiting_reason or "", "task_type": task_type or ""}
    return page(request, "tasks.html", tasks=rows, filters=filters, every=every,
                statuses=[s.value for s in TaskStatus])


@router.get("/tasks/{task_id}")
async def task_page(
    task_id: str, request: Request, signed: SignedIn, engine: EngineDep, settings: SettingsDep,
    temporal: TemporalSource, store: ArtifactsDep, done: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    principal = signed.principal
    view = await task_reads.get_task(temporal, engine, principal, task_id)
    try:
        timeline = (await task_reads.timeline(temporal, engine, principal, task_id)).entries
    except NotFound:  # started, its first step not recorded yet
        timeline = []
    draft = await run_in_threadpool(drafts.draft_of, view, engine, store, principal)
    owner = view.owner_user_id or ""
    policy = await run_in_threadpool(task_reads.tenant_policy_of, engine, principal.tenant_id)
    refusal = decider_refusal(principal.user_id, principal.roles, owner,
                              owner_may_decide=not policy.separation_of_duties)
    return page(
        request, "task.html", task=view, timeline=timeline, draft=draft, done=outcome(done),
        temporal_url=temporal_link(settings.temporal_ui_url, settings.temporal_namespace, view.workflow_id,
                                   view.run_id),
        may_control=view.status not in TERMINAL and may_control_task(principal.user_id, principal.roles, owner),
        may_resolve=may_operate(principal.roles),
        why_not_decide=refusal.message if refusal is not None else None,
    )


@router.get("/tasks/{task_id}/confirm")
async def confirm(
    task_id: str, request: Request, signed: SignedIn, engine: EngineDep, temporal: TemporalSource,
    action: Annotated[Literal["pause", "resume", "cancel", "resolve"], Query()],
    operation_id: Annotated[str | None, Query(max_length=64)] = None,
) -> HTMLResponse:
    """The confirmation step of an operator action: what it does, and one button that does it."""
    view = await task_reads.get_task(temporal, engine, signed.principal, task_id)
    if action == "resolve" and not any(op.operation_id == operation_id for op in view.operations or []):
        raise NotFound(f"task {task_id} has no operation {operation_id}")
    return page(request, "confirm.html", task=view, action=action, operation_id=operation_id)


@router.post("/tasks/{task_id}/control")
async def control(
    task_id: str, signed: CheckedForm, engine: EngineDep, temporal: TemporalSource,
    action: Annotated[Control, Form()], reason: Annotated[str | None, Form(max_length=2_000)] = None,
) -> Response:
    body = ControlIn(reason=reason.strip()) if reason and reason.strip() else None
    view = await task_actions.control(temporal, engine, signed.principal, task_id, action, body)
    return back_to(f"/console/tasks/{view.task_id}?done={action}")


@router.post("/tasks/{task_id}/operations/{operation_id}/resolve")
async def resolve(
    task_id: str, operation_id: str, signed: CheckedForm, engine: EngineDep, temporal: TemporalSource,
    outcome: Annotated[Literal["published", "not_published"], Form()],
    note: Annotated[str, Form(max_length=2_000)] = "",
) -> Response:
    if not note.strip():
        raise InvalidInput("say what you checked at the destination (the note), so others can follow your verdict",
                           code="note_required")
    await task_actions.resolve(temporal, engine, signed.principal, task_id, operation_id,
                               ResolveIn(outcome=outcome, note=note.strip()))
    return back_to(f"/console/tasks/{task_id}?done=resolved")


@router.get("/tasks/{task_id}/artifacts/{sha256}")
def artifact(task_id: str, sha256: str, signed: SignedIn, engine: EngineDep, store: ArtifactsDep) -> Response:
    """An artifact's bytes (a chart, the draft's HTML) through the API's own gate."""
    response = artifact_response(sha256, *task_reads.open_artifact(engine, store, signed.principal, task_id, sha256))
    response.headers.update(SAFE_ARTIFACT_HEADERS)
    return response


@router.get("/tasks/{task_id}/report")
async def published_report(
    task_id: str, signed: SignedIn, engine: EngineDep, temporal: TemporalSource, store: ArtifactsDep
) -> Response:
    """The report as the destination received it: the HTML of the draft the approval was bound to."""
    view = await task_reads.get_task(temporal, engine, signed.principal, task_id)
    approved = [
        entry["artifact_sha256"]
        for entry in (await task_reads.timeline(temporal, engine, signed.principal, view.task_id)).entries
        if entry["kind"] == "approval" and entry["status"] == "APPROVED"
    ]
    if not view.publications or not approved:
        raise NotFound(f"task {task_id} has published no report yet (it is {view.status})")
    manifest = await run_in_threadpool(drafts.artifact_bytes, engine, store, signed.principal, view.task_id,
                                       approved[-1])
    html_sha256 = json.loads(manifest)["html_sha256"]
    return await run_in_threadpool(artifact, view.task_id, html_sha256, signed, engine, store)
