"""Recall over HTTP: the memory bundle (POST /memory-query), its prompt text (POST /recall/render) and the
bundle audit trail (GET /recall/audit).

The pipeline is :func:`memory.recall.service.recall`; this router only translates HTTP. The key is
checked by the first statement of the bundle's own transaction, so a plain recall costs one
connection; a request that needs its principal earlier (a live task state, a ``min_revision`` wait)
authenticates first. A required source that cannot be read is an error, never a partial bundle.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api.deps import (
    CurrentPrincipal,
    EmbeddingLanesDep,
    EngineDep,
    PresentedKey,
    authenticated,
    require_role,
    temporal_source,
)
from api.observability.logging import bind_tenant
from api.observability.metrics import observe_bundle
from api.schemas.recall import AuditEventOut, AuditEventsOut, BundleOut, RecallIn, RenderOut
from api.services.tasks import live_task_state
from memory.auth import authenticated_session
from memory.db import tenant_session
from memory.enums import Role
from memory.errors import MnemoError
from memory.recall import audit
from memory.recall.plan import Intent, SourceType
from memory.recall.render import render
from memory.recall.service import RecallOptions, plan_for, recall, wait_for_revision
from memory.resources.catalog import only_internal

router = APIRouter(tags=["recall"])


def _options(body: RecallIn) -> RecallOptions:
    return RecallOptions(
        limit=body.limit, candidate_limit=body.candidate_limit, token_budget=body.token_budget,
        categories=tuple(body.categories), spaces=tuple(body.spaces), project_id=body.project_id,
        session_id=body.session_id, purpose=body.purpose, intent=Intent(body.intent) if body.intent else None,
        task_id=body.task_id, request_constraints=dict(body.request_constraints), keys=tuple(body.keys),
        min_relevance=body.min_relevance, explain=body.explain, trace_id=body.trace_id, retrieval=body.retrieval,
    )


async def _bundle(
    body: RecallIn, key: str, engine: EngineDep, lanes: EmbeddingLanesDep, request: Request
) -> dict[str, Any]:
    """The bundle of one request (both POST endpoints): what the plan needs from outside, then one recall."""
    options = _options(body)
    try:
        plan = plan_for(body.query, options)
    except MnemoError:
        await run_in_threadpool(authenticated, key, engine)  # a caller without a valid key hears 401 first
        raise
    task_state = None
    if plan.reads(SourceType.TASK_STATE) or body.min_revision is not None:
        principal = await run_in_threadpool(authenticated, key, engine)
        only_internal(principal, "recall")
        if plan.reads(SourceType.TASK_STATE):
            assert body.task_id is not None
            task_state = await live_task_state(engine, await temporal_source(request), principal, body.task_id)
        if body.min_revision is not None:
            await run_in_threadpool(wait_for_revision, engine, principal.tenant_id, body.min_revision)

    def run() -> dict[str, Any]:
        now = datetime.now(UTC)
        with authenticated_session(engine, key) as (session, principal):
            bind_tenant(principal.tenant_id)
            only_internal(principal, "recall")
            return recall(session, principal, body.query, now, options, task_state=task_state, embedding=lanes,
                          reranker=request.app.state.reranker)

    bundle = await run_in_threadpool(run)
    observe_bundle(bundle)
    return bundle


@router.post("/memory-query", response_model=BundleOut)
async def query_memories(
    body: RecallIn, key: PresentedKey, engine: EngineDep, lanes: EmbeddingLanesDep, request: Request,
) -> JSONResponse:
    """Recall: a memory bundle (plan, hard filters, hybrid candidates, explained scores, conflicts, budget).

    Returned as a ready JSONResponse (:class:`BundleOut` documents it): the bundle holds only JSON types
    already, and FastAPI's generic encoder walking it again cost ~1 ms a request.
    """
    return JSONResponse(await _bundle(body, key, engine, lanes, request))


@router.post("/recall/render")
async def render_bundle(
    body: RecallIn, key: PresentedKey, engine: EngineDep, lanes: EmbeddingLanesDep, request: Request,
) -> RenderOut:
    """The bundle as prompt text (XML-like sections, provenance and score on each hit); "" when empty."""
    bundle = await _bundle(body, key, engine, lanes, request)
    return RenderOut(text=render(bundle), trace_id=bundle["trace_id"], snapshot_revision=bundle["snapshot_revision"])


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
