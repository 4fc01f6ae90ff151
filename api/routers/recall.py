"""Recall over HTTP: the bundle (POST /memory-query), its prompt rendering, and the bundle audit trail.

The handler is async only to ask the task workflow for its live state (a
Temporal query); the database work and the query embedding run in the thread
pool. A required source that cannot be read is an error, never a partial bundle.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.service import RPCError, RPCStatusCode

from api.deps import CurrentPrincipal, EngineDep, PresentedKey, current_principal, get_temporal
from api.limits import FairQueue, TenantLimiter
from api.schemas import RecallIn
from api.settings import Settings
from memory.auth import PrincipalContext, authenticated_session
from memory.db import tenant_session
from memory.embeddings import Embedder, default_embedder
from memory.enums import Role
from memory.errors import Conflict, Forbidden, MnemoError, NotFound
from memory.recall import audit
from memory.recall.bundle import RecallRequest, build_bundle, mark_used, snapshot_revision
from memory.recall.plan import Intent, SourceType, classify_intent, make_plan
from memory.recall.render import render
from memory.recall.scope import allowed_scope
from memory.tasks.keys import workflow_id

router = APIRouter(tags=["recall"])

MIN_REVISION_WAIT_SECONDS = 2.0
QUERY_ENGINES = Settings().query_embedding_engines
EMBEDDING_QUEUE = FairQueue("mnemo-embed", lanes=QUERY_ENGINES)
"""Query embeddings run here, beside the database work: tenants in turn, one engine child per lane,
one running embedding per tenant (see :class:`api.limits.FairQueue`)."""
_lane_engines: dict[int, Embedder] = {}


def _embed_on_lane(lane: int, text: str) -> list[float]:
    """Lane 0 uses the process's embedder (shared with the other query paths); each other lane its own child."""
    if lane == 0:
        return default_embedder().embed_one(text)
    if lane not in _lane_engines:
        _lane_engines[lane] = Embedder()  # only this lane's thread creates and uses it
    return _lane_engines[lane].embed_one(text)


class SourceUnavailable(MnemoError):
    """A source the plan requires (the live task state) cannot be read now: a 503 with Retry-After."""

    code = "required_source_unavailable"
    http_status = 503

    def __init__(self, message: str) -> None:
        super().__init__(message, details={"retry_after_seconds": 5})


class RevisionNotReached(Conflict):
    code = "revision_not_reached"


def _task_owner(engine: Engine, tenant_id: str, task_id: str) -> str | None:
    from memory.tasks.transitions import task_owner

    with tenant_session(engine, tenant_id) as session:
        return task_owner(session, tenant_id, task_id)


async def _task_state(request: Request, principal: PrincipalContext, task_id: str) -> dict[str, Any]:
    """The live task from its workflow's query; the caller must own it (else the same 404 as a missing task)."""
    from workflows.report_task import ReportTaskWorkflow

    # The read model first: another user's task is refused without asking Temporal, so it answers
    # like a missing one and no slower (issue 12, finding 11). No row yet: the live state decides below.
    owner = await run_in_threadpool(_task_owner, request.app.state.engine, principal.tenant_id, task_id)
    if owner is not None and owner != principal.user_id:
        raise NotFound(f"task {task_id} does not exist")
    try:
        client = await get_temporal(request)
        state = await client.get_workflow_handle(workflow_id(principal.tenant_id, task_id)).query(
            ReportTaskWorkflow.state, rpc_timeout=timedelta(seconds=5)
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"task {task_id} does not exist") from exc
        raise SourceUnavailable(f"the task state of {task_id} could not be read: {exc.message}") from exc
    except (OSError, RuntimeError) as exc:
        raise SourceUnavailable(f"the task state of {task_id} could not be read: {exc}") from exc
    if state is None or state.owner_user_id != principal.user_id or state.tenant_id != principal.tenant_id:
        raise NotFound(f"task {task_id} does not exist")
    return {
        "task_id": state.task_id, "status": state.status, "current_step_id": state.current_step_id,
        "state_version": state.state_version, "waiting_reason": state.waiting_reason,
    }


def _wait_for_revision(engine: Any, tenant_id: str, min_revision: int) -> None:
    """Read-your-writes: a bounded wait for ``min_revision``, then a clear answer with the current one."""
    deadline = time.monotonic() + MIN_REVISION_WAIT_SECONDS
    while True:
        with tenant_session(engine, tenant_id) as session:
            current = snapshot_revision(session)
        if current >= min_revision:
            return
        if time.monotonic() >= deadline:
            raise RevisionNotReached(
                f"this store is at revision {current}, not yet {min_revision}; retry shortly",
                details={"current_revision": current, "min_revision": min_revision},
            )
        time.sleep(0.05)


async def build(body: RecallIn, key: str, engine: Engine, request: Request) -> dict[str, Any]:
    """The whole recall path for one request; shared by /memory-query and /recall/render.

    The key is checked by the first statement of the bundle's own transaction (one connection, no
    transaction of its own before it), and the query embedding starts right after that check, beside
    the lexical sources. A task-state or ``min_revision`` request needs the principal before that
    transaction (a Temporal query, a wait): it authenticates first as well.
    """
    try:
        intent = Intent(body.intent) if body.intent else classify_intent(body.query, body.task_id)
        plan = make_plan(intent, task_id=body.task_id, candidate_limit=max(body.candidate_limit, body.limit),
                         inject_limit=body.limit, token_budget=body.token_budget)
    except MnemoError:
        await run_in_threadpool(current_principal, key, engine)  # a caller without a valid key hears 401 first
        raise
    task_state = None
    if plan.reads(SourceType.TASK_STATE) or body.min_revision is not None:
        principal = await run_in_threadpool(current_principal, key, engine)
        if plan.reads(SourceType.TASK_STATE):
            assert body.task_id is not None
            task_state = await _task_state(request, principal, body.task_id)
        if body.min_revision is not None:
            await run_in_threadpool(_wait_for_revision, engine, principal.tenant_id, body.min_revision)
    semantic = plan.reads(SourceType.MEMORY) is not None and body.retrieval != "lexical"
    submitted: list[Future[list[float]]] = []

    def run() -> dict[str, Any]:
        now = datetime.now(timezone.utc)
        limiter: TenantLimiter = request.app.state.recall_limiter
        with authenticated_session(engine, key) as (session, principal), limiter.slot(principal.tenant_id):
            vector = None
            # Loaded once per process, by the first authenticated caller that needs it.
            embedder = default_embedder() if semantic else None
            if embedder is not None:
                # Awaited by the pipeline after its lexical sources: the two overlap.
                vector = EMBEDDING_QUEUE.submit(principal.tenant_id, _embed_on_lane, body.query)
                submitted.append(vector)
            filters = allowed_scope(principal, categories=tuple(body.categories), spaces=tuple(body.spaces),
                                    project_id=body.project_id, session_id=body.session_id, purpose=body.purpose)
            recall = RecallRequest(
                query=body.query, plan=plan, filters=filters, request_constraints=dict(body.request_constraints),
                keys=tuple(body.keys), task_state=task_state, query_vector=vector,
                model=embedder.name if embedder is not None else None,
                min_relevance=body.min_relevance, explain=body.explain, retrieval=body.retrieval,
                **({"trace_id": body.trace_id} if body.trace_id else {}),
            )
            outcome = build_bundle(session, principal, recall, now)
            audit.record_bundle(session, principal, body.query, outcome.bundle, outcome.filtered, body.purpose)
            mark_used(session, principal.tenant_id, outcome.selected, now)
        return outcome.bundle

    try:
        return await run_in_threadpool(run)
    finally:
        for vector in submitted:
            vector.cancel()  # a request that failed before needing it gives its place in the queue back


@router.post("/recall/render", responses={429: {"description": "tenant_busy"}})
async def render_bundle(body: RecallIn, key: PresentedKey, engine: EngineDep, request: Request) -> dict[str, Any]:
    """The bundle as prompt text (XML-like sections, provenance and score on each hit); "" when empty."""
    bundle = await build(body, key, engine, request)
    return {"text": render(bundle), "trace_id": bundle["trace_id"], "snapshot_revision": bundle["snapshot_revision"]}


@router.get("/recall/audit")
def bundle_audit(
    principal: CurrentPrincipal,
    engine: EngineDep,
    trace_id: Annotated[str | None, Query(max_length=256)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """MEMORY_BUNDLE_BUILT events of the caller's tenant (admin, auditor or operator): ids, versions, reasons."""
    if not (principal.has(Role.AUDITOR) or principal.has(Role.OPERATOR)):
        raise Forbidden("reading recall audit events needs the admin, auditor or operator role")
    with tenant_session(engine, principal.tenant_id) as session:
        events = audit.bundle_events(session, principal.tenant_id, trace_id, limit)
    return {"events": [{"audit_id": e.audit_id, "at": e.at.isoformat(), "actor": e.actor, **e.detail} for e in events]}
