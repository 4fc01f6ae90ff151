"""The approver's inbox and decision. A decision is the API's (``POST /tasks/{id}/approvals``, through
:func:`api.services.task_actions.decide`): the same Temporal Update and validator, bound to the sha256 and
state_version the page showed, so a draft that changed since is refused with the validator's sentence, never
approved."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse

from api.console.web import CheckedForm, ConsoleRoute, SignedIn, back_to, page
from api.deps import EngineDep, TemporalSource
from api.schemas.tasks import DecisionIn
from api.services import task_actions
from memory.db import tenant_session
from memory.errors import Forbidden
from memory.identity.auth import may_approve
from memory.tasks.approvals import pending_approval
from memory.tasks.artifacts import get_artifact
from memory.tasks.states import TaskStatus
from memory.tasks.timeline import list_tasks

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


@router.get("/approvals")
def inbox(request: Request, signed: SignedIn, engine: EngineDep) -> HTMLResponse:
    """Tasks of any type waiting for approval, soonest deadline first, each with the artifact it is asked about."""
    principal = signed.principal
    if not may_approve(principal.roles):
        raise Forbidden("the approvals inbox needs the approver role")
    with tenant_session(engine, principal.tenant_id) as session:
        waiting = list_tasks(session, principal.tenant_id, owner_user_id=None,
                             status=TaskStatus.WAITING_FOR_APPROVAL.value, limit=200)
        rows = [(task, pending_approval(session, principal.tenant_id, task.task_id)) for task in waiting]
        asked = {pending.approval_id: get_artifact(session, principal.tenant_id, task.task_id, pending.artifact_sha256)
                 for task, pending in rows if pending is not None}
    rows.sort(key=lambda row: (row[1] is None, row[1].deadline_at if row[1] else None, row[0].task_id))
    return page(request, "approvals.html", rows=rows, asked=asked)


@router.post("/tasks/{task_id}/decision")
async def decide(
    task_id: str,
    signed: CheckedForm,
    engine: EngineDep,
    temporal: TemporalSource,
    decision: Annotated[Literal["approve", "reject"], Form()],
    artifact_sha256: Annotated[str, Form(pattern=r"^[0-9a-f]{64}$")],
    state_version: Annotated[int, Form(ge=0)],
    reason: Annotated[str | None, Form(max_length=2_000)] = None,
) -> Response:
    given = {"reason": reason.strip()} if reason and reason.strip() else {}
    body = DecisionIn(decision=decision, artifact_sha256=artifact_sha256, state_version=state_version, **given)
    result = await task_actions.decide(temporal, engine, signed.principal, task_id, body)
    return back_to(f"/console/tasks/{task_id}?done={'approved' if result.decision == 'approve' else 'rejected'}")
