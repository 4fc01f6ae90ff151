"""Knowledge candidates over HTTP: propose, read, revise and review. Rules in :mod:`memory.knowledge`, Temporal
and reads in :mod:`api.services.knowledge`; this module only translates HTTP."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Response, status
from starlette.concurrency import run_in_threadpool

from api.deps import CurrentPrincipal, EngineDep, SettingsDep, TemporalSource
from api.schemas.common import replay_of
from api.schemas.knowledge import (
    CANDIDATE_SCHEMA,
    REVISION_SCHEMA,
    CandidateCreatedOut,
    CandidateListOut,
    CandidateOut,
    ReviewIn,
    ReviewOut,
)
from api.services import knowledge

router = APIRouter(tags=["knowledge"])
Status = Literal["PENDING_REVIEW", "CHANGES_REQUESTED", "APPROVED", "REJECTED", "WITHDRAWN", "EXPIRED"]


@router.post(
    "/knowledge-candidates",
    status_code=status.HTTP_201_CREATED,
    response_model=CandidateCreatedOut,
    responses=replay_of(CandidateCreatedOut),
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": CANDIDATE_SCHEMA}}}},
)
async def propose(body: Annotated[dict[str, Any], Body()], principal: CurrentPrincipal, engine: EngineDep,
                  settings: SettingsDep, temporal: TemporalSource, response: Response) -> CandidateCreatedOut:
    """Propose knowledge: redacted, compared with published knowledge (409 ``knowledge_already_published`` for an
    exact copy), PENDING_REVIEW until a knowledge reviewer decides; its review workflow starts now."""
    proposed = await knowledge.create(temporal, engine, settings.task_queue, knowledge.review_policy(settings),
                                      principal, body)
    if not proposed.created:
        response.status_code = status.HTTP_200_OK
    return await run_in_threadpool(knowledge.created_out, engine, proposed.candidate)


@router.get("/knowledge-candidates", response_model=CandidateListOut)
def list_candidates(principal: CurrentPrincipal, engine: EngineDep,
                    status: Annotated[Status | None, Query()] = None) -> CandidateListOut:
    """A knowledge reviewer: the tenant's candidates; anyone else: their own. Oldest first."""
    return knowledge.list_candidates(engine, principal, status)


@router.get("/knowledge-candidates/{candidate_id}", response_model=CandidateOut)
def get_candidate(candidate_id: str, principal: CurrentPrincipal, engine: EngineDep) -> CandidateOut:
    """Everything a reviewer sees: content, redactions (kind, path), duplicates, conflicts, deadline, decision."""
    return knowledge.show_candidate(engine, principal, candidate_id)


@router.put(
    "/knowledge-candidates/{candidate_id}",
    response_model=CandidateOut,
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": REVISION_SCHEMA}}}},
)
async def revise(candidate_id: str, body: Annotated[dict[str, Any], Body()], principal: CurrentPrincipal,
                 engine: EngineDep, temporal: TemporalSource) -> CandidateOut:
    """The author's new content after ``request_changes`` (``version`` names the one revised; else 409
    ``version_conflict``): version + 1, back to PENDING_REVIEW."""
    return await knowledge.revise(temporal, engine, principal, candidate_id, body)


@router.post("/knowledge-candidates/{candidate_id}/reviews", response_model=ReviewOut)
async def review(candidate_id: str, body: ReviewIn, principal: CurrentPrincipal, engine: EngineDep,
                 temporal: TemporalSource) -> ReviewOut:
    """Approve (publishes a version), reject or request changes (both need a reason), naming the content_sha256
    and state_version you reviewed. 403 without ``knowledge_reviewer``, ``knowledge_self_review``,
    ``knowledge_agent_review``; 409 ``knowledge_hash_mismatch``, ``knowledge_state_version_mismatch``,
    ``knowledge_conflicts_changed`` (read the candidate again), ``knowledge_candidate_closed``."""
    return await knowledge.decide(temporal, engine, principal, candidate_id, body)
