"""Tasks of any definition: the list with filters, a task's page (the artifact under approval, every artifact by
step, the pinned definition's steps, the agent holding a step, timeline, Temporal link, operator actions behind a
confirmation), its artifacts and its published artifact, each shown by media type
(:mod:`api.console.render_artifact`). Every read and action is the API's own service
(:mod:`api.services.task_reads`, :mod:`api.services.task_actions`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import HTMLResponse
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from api.console.reads import StepLine, agent_claim, task_artifacts, task_steps
from api.console.render_artifact import Shown, render
from api.console.web import CheckedForm, ConsoleRoute, SignedIn, back_to, outcome, page
from api.deps import ArtifactsDep, EngineDep, SettingsDep, TemporalSource
from api.responses import artifact_response
from api.schemas.tasks import ControlIn, ResolveIn, TaskView
from api.services import task_actions, task_reads
from api.services.task_actions import Control
from memory.artifact_store import ArtifactStore
from memory.db import tenant_session
from memory.errors import InvalidInput, NotFound
from memory.identity.auth import PrincipalContext, may_control_task, may_operate, may_read_every_task
from memory.tasks.approvals import decider_refusal
from memory.tasks.leases import WAITING_REASON as AGENT
from memory.tasks.models import TaskArtifact, TaskAttempt
from memory.tasks.states import TERMINAL, TaskStatus
from memory.tasks.timeline import list_tasks

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)
Filter = Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_-]{0,64}$")]
SAFE_ARTIFACT_HEADERS = {
    # A draft or report is the worker's HTML: opened as a document of its own, it may run no script and load
    # nothing but its embedded images (the draft's frame on the task page is sandboxed as well); only the
    # console's own task page may frame it (every other console response may be framed by no one).
    # Opened on a page of its own it is sandboxed too (scripts, forms, popups: none; its origin kept for the
    # frame-fitting script), and can post no form anywhere: an agent's HTML cannot ask an approver for a key.
    "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'; "
                               "sandbox allow-same-origin; form-action 'none'; base-uri 'none'",
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


@dataclass(frozen=True)
class Panels:
    """What a task page shows beside the task's view: each read through the API's gate or after it."""

    under_approval: Shown | None
    """The artifact waiting for a decision, else the latest draft (``draft_sha256``)."""
    viewed: Shown | None
    """The artifact the reader picked from the list (``?artifact=``)."""
    artifacts: list[TaskArtifact]
    steps: list[StepLine]
    claim: TaskAttempt | None


def panels(engine: Engine, store: ArtifactStore, principal: PrincipalContext, view: TaskView,
           timeline: list[dict[str, Any]], picked: str | None) -> Panels:
    """The artifacts listed in the order of the steps that wrote them; the two shown, each through the gate."""
    pending = view.pending_approval
    sha = (pending.artifact_sha256 if pending else None) or view.draft_sha256
    tenant, task_id = principal.tenant_id, view.task_id
    steps = task_steps(engine, tenant, view.task_type, view.workflow_version,
                       [e["step_id"] for e in timeline if e.get("step_id")])
    order = {step.step_id: index for index, step in enumerate(steps)}
    artifacts = task_artifacts(engine, tenant, task_id)
    artifacts.sort(key=lambda a: (order.get(a.step_id, len(order)), a.step_id, a.created_at, a.name))
    waiting_step = view.current_step_id if view.waiting_reason == AGENT else None
    return Panels(
        under_approval=None if sha is None else render(engine, store, principal, task_id, sha),
        viewed=None if picked is None else render(engine, store, principal, task_id, picked),
        artifacts=artifacts,
        steps=steps,
        claim=None if waiting_step is None else agent_claim(engine, tenant, task_id, waiting_step),
    )


@router.get("/tasks/{task_id}")
async def task_page(
    task_id: str, request: Request, signed: SignedIn, engine: EngineDep, settings: SettingsDep,
    temporal: TemporalSource, store: ArtifactsDep, done: Annotated[str | None, Query(max_length=200)] = None,
    picked: Annotated[str | None, Query(alias="artifact", pattern=r"^[0-9a-f]{64}$")] = None,
) -> HTMLResponse:
    principal = signed.principal
    view = await task_reads.get_task(temporal, engine, principal, task_id)
    try:
        timeline = (await task_reads.timeline(temporal, engine, principal, task_id)).entries
    except NotFound:  # started, its first step not recorded yet
        timeline = []
    shown = await run_in_threadpool(panels, engine, store, principal, view, timeline, picked)
    owner = view.owner_user_id or ""
    policy = await run_in_threadpool(task_reads.tenant_policy_of, engine, principal.tenant_id)
    refusal = decider_refusal(principal.user_id, principal.roles, owner,
                              owner_may_decide=not policy.separation_of_duties)
    return page(
        request, "task.html", task=view, timeline=timeline, panels=shown, draft=shown.under_approval,
        done=outcome(done), now=datetime.now(UTC),
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
    task_id: str, request: Request, signed: SignedIn, engine: EngineDep, temporal: TemporalSource,
    store: ArtifactsDep,
) -> Response:
    """What the destination received: the approved artifact the publication sent, shown by its media type (a
    manifest's HTML, or HTML, as the document itself, under the artifact route's CSP)."""
    view = await task_reads.get_task(temporal, engine, signed.principal, task_id)
    published = await run_in_threadpool(task_reads.publications, engine, signed.principal, view.task_id)
    if not published.items:
        raise NotFound(f"task {task_id} has published nothing yet (it is {view.status})")
    shown = await run_in_threadpool(render, engine, store, signed.principal, view.task_id,
                                    published.items[-1].artifact_sha256)
    if shown.view in ("manifest", "html"):
        document = shown.manifest.html_sha256 if shown.manifest else shown.artifact.sha256
        return await run_in_threadpool(artifact, view.task_id, document, signed, engine, store)
    return page(request, "report.html", task=view, shown=shown)
