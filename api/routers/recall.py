"""Recall over HTTP: the memory bundle (POST /memory-query), its prompt text (POST /recall/render) and the
bundle audit trail (GET /recall/audit).

The pipeline is :func:`memory.recall.service.recall`, run by :class:`api.services.recall.Recaller` as MCP runs it;
this router only translates HTTP. The key is
checked by the first statement of the bundle's own transaction, so a plain recall costs one
connection; a request that needs its principal earlier (a live task state, a ``min_revision`` wait)
authenticates first. A required source that cannot be read is an error, never a partial bundle.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api.deps import CurrentPrincipal, EngineDep, PresentedKey, authenticated, temporal_source
from api.schemas.recall import AuditEventOut, AuditEventsOut, BundleOut, RecallIn, RenderOut, bundle_body
from api.services.recall import Recaller, task_found
from memory.db import tenant_session
from memory.enums import Role
from memory.errors import MnemoError
from memory.identity.auth import require_role
from memory.recall import audit
from memory.recall.bundle_types import Bundle
from memory.recall.plan import Intent, SourceType
from memory.recall.render import render
from memory.recall.service import RecallOptions, plan_for, wait_for_revision
from memory.resources.catalog import only_internal

router = APIRouter(tags=["recall"])


def options_of(body: RecallIn) -> RecallOptions:
    """The recall options of a request body (identity and the live task come from elsewhere)."""
    return RecallOptions(
        limit=body.limit, candidate_limit=body.candidate_limit, token_budget=body.token_budget,
        skill_token_budget=body.skill_token_budget,
        categories=tuple(body.categories), spaces=tuple(body.spaces), project_id=body.project_id,
        session_id=body.session_id, purpose=body.purpose, intent=Intent(body.intent) if body.intent else None,
        task_id=body.task_id, request_constraints=dict(body.request_constraints), keys=tuple(body.keys),
        min_relevance=body.min_relevance, explain=body.explain, trace_id=body.trace_id, retrieval=body.retrieval,
    )


async def _bundle(body: RecallIn, key: str, engine: EngineDep, request: Request) -> Bundle:
    """The bundle of one request (both POST endpoints): what the plan needs from outside, then one recall."""
    options = options_of(body)
    try:
        plan = plan_for(body.query, options)
    except MnemoError:
        await run_in_threadpool(authenticated, key, engine)  # a caller without a valid key hears 401 first
        raise
    task = None
    if plan.reads(SourceType.TASK_STATE) or body.min_revision is not None:
        principal = await run_in_threadpool(authenticated, key, engine)
        only_internal(principal, "recall")
        task = await task_found(engine, await temporal_source(request), principal, plan, body.task_id)
        if body.min_revision is not None:
            await run_in_threadpool(wait_for_revision, engine, principal.tenant_id, body.min_revision)
    return await run_in_threadpool(Recaller.of(request.app.state).with_key, key, body.query, options, task)


@router.post("/memory-query", response_model=BundleOut)
async def query_memories(
    body: RecallIn, key: PresentedKey, engine: EngineDep, request: Request,
) -> JSONResponse:
    """Recall: a memory bundle (plan, hard filters, hybrid candidates, explained scores, conflicts, budget).

    Returned as a ready JSONResponse of :func:`bundle_body` (:class:`BundleOut` documents it): FastAPI's
    generic encoder walking it again cost ~1 ms a request.
    """
    return JSONResponse(bundle_body(await _bundle(body, key, engine, request)))


@router.post("/recall/render")
async def render_bundle(
    body: RecallIn, key: PresentedKey, engine: EngineDep, request: Request,
) -> RenderOut:
    """The bundle as prompt text (XML-like sections, provenance and score on each hit); "" when empty."""
    bundle = await _bundle(body, key, engine, request)
    return RenderOut(text=render(bundle), trace_id=bundle.trace_id, snapshot_revision=bundle.snapshot_revision)


@router.get("/recall/audit")
def bundle_audit(
    principal: CurrentPrincipal,
    engine: EngineDep,
    trace_id: Annotated[str | None, Query(max_length=256)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> AuditEventsOut:
    """MEMORY_BUNDLE_BUILT events of the caller's tenant (admin, auditor or operator): ids, versions, reasons."""
    require_role(principal, Role.ADMIN, Role.AUDITOR, Role.OPERATOR, to="reading recall audit events")
    with tenant_session(engine, principal.tenant_id) as session:
        events = audit.bundle_events(session, principal.tenant_id, trace_id, limit)
    return AuditEventsOut(
        events=[AuditEventOut(audit_id=e.audit_id, at=e.at.isoformat(), actor=e.actor, **e.detail) for e in events]
    )
