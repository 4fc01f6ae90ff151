"""Deletion jobs (per-layer status, evidence, remaining copies; an operator resumes a stopped one) and
retention holds (an admin puts and lifts them). Each read and action is the API's own service
(:mod:`api.services.deletions`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse

from api.console.reads import deletion_jobs, holds
from api.console.web import CheckedForm, ConsoleRoute, SignedIn, back_to, page
from api.deps import EngineDep, TemporalSource
from api.schemas.deletions import HoldIn
from api.services import deletions
from memory.enums import Role
from memory.errors import Forbidden
from memory.identity.ids import parse_id

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


@router.get("/deletions")
def job_list(request: Request, signed: SignedIn, engine: EngineDep) -> HTMLResponse:
    principal = signed.principal
    return page(
        request, "deletions.html", jobs=deletion_jobs(engine, principal),
        holds=holds(engine, principal.tenant_id) if principal.has(Role.ADMIN) else None,
    )


@router.get("/deletions/{job_id}")
def job_page(job_id: str, request: Request, signed: SignedIn, engine: EngineDep) -> HTMLResponse:
    job = deletions.read_job(engine, signed.principal, parse_id(job_id, "deletion job"))
    return page(request, "deletion.html", job=job)


@router.post("/deletions/{job_id}/resume")
async def resume(job_id: str, signed: CheckedForm, engine: EngineDep, temporal: TemporalSource) -> Response:
    await deletions.resume(temporal, engine, signed.principal, job_id)
    return back_to(f"/console/deletions/{job_id}")


@router.post("/holds")
def create_hold(
    signed: CheckedForm, engine: EngineDep,
    user_id: Annotated[str, Form(min_length=1, max_length=256)],
    reason: Annotated[str, Form(min_length=1, max_length=1_000)],
) -> Response:
    if not signed.principal.has(Role.ADMIN):
        raise Forbidden("putting a retention hold needs the admin role")
    deletions.create_hold(engine, signed.principal, HoldIn(user_id=user_id.strip(), reason=reason.strip()))
    return back_to("/console/deletions")


@router.post("/holds/{hold_id}/release")
async def release_hold(hold_id: str, signed: CheckedForm, engine: EngineDep, temporal: TemporalSource) -> Response:
    await deletions.release_hold(temporal, engine, signed.principal, parse_id(hold_id, "retention hold"))
    return back_to("/console/deletions")
