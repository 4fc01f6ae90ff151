"""Memories: candidates, confirmation, reads, corrections and expiry (recall is api/routers/recall.py)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response, status
from sqlalchemy.orm import Session

from api.deps import CurrentPrincipal, EngineDep, SettingsDep, TemporalSource
from api.schemas.common import INT32_MAX, replay_of
from api.schemas.knowledge import PROMOTION_SCHEMA, PromotionOut
from api.schemas.memories import (
    CandidateIn,
    CorrectionIn,
    MemoryDetailOut,
    MemoryOut,
    WriteOut,
)
from api.services import knowledge, promotions
from api.services import memories as service
from api.services.memories import source_of, validity_of
from memory.db import tenant_session
from memory.errors import InvalidInput
from memory.identity.ids import parse_id
from memory.models import Memory
from memory.store import memories
from memory.store.events import request_digest
from memory.store.message_text import message_content, quote_start
from memory.store.projection import has_vector
from workflows.embedding import SWEEP_EVERY as EMBEDDING_SWEEP_EVERY

router = APIRouter(tags=["memories"])


def _memory_id(raw: str) -> uuid.UUID:
    return parse_id(raw, "memory")


def _content(body: CandidateIn) -> tuple[str, int | None]:
    """The memory's text and where a quoted message begins in it: ``content`` as given (quoting nothing),
    or written from ``message`` (exactly one of them)."""
    if body.content is not None and body.message is None:
        return body.content, None
    if body.message is not None and body.content is None:
        said = body.message.said()
        return message_content(said), quote_start(said)
    raise InvalidInput("give the memory's content or the message it comes from, exactly one of them",
                       code="content_or_message")


def _written(session: Session, memory: Memory, replayed: bool) -> WriteOut:
    """What is searchable now: the lexical projection is written in the write's own transaction; the vector
    comes from the embedding sweep (a replay or a confirmation may find it already there)."""
    vector = has_vector(session, memory)
    return WriteOut(
        memory_id=memory.memory_id,
        version=memory.version,
        status=memory.status,
        stage="indexed" if vector else "searchable",
        indexes={"lexical": "indexed", "vector": "indexed" if vector else "pending"},
        vector_expected_within_seconds=None if vector else int(EMBEDDING_SWEEP_EVERY.total_seconds()),
        replayed=replayed,
        revision=memory.revision,
    )


@router.post(
    "/memory-candidates",
    status_code=status.HTTP_201_CREATED,
    responses=replay_of(WriteOut),
)
def submit_candidate(body: CandidateIn, principal: CurrentPrincipal, engine: EngineDep, response: Response) -> WriteOut:
    """Submit a memory. It is ACTIVE at once for a memory writer with E1-E3 evidence, else a CANDIDATE."""
    content, quoted_from = _content(body)
    new = memories.NewMemory(
        category=body.category,
        space=body.space,
        content=content,
        quote_start=quoted_from,
        source=source_of(body.source),
        source_level=body.source_level,
        abstract=body.abstract,
        overview=body.overview,
        key=body.key,
        project_id=body.project_id,
        session_id=body.session_id,
        confidence=body.confidence,
        validity=validity_of(body.validity) or memories.Validity(),
        allowed_purposes=tuple(body.allowed_purposes),
        idempotency_key=body.idempotency_key,
    )
    digest = request_digest(body.model_dump(mode="json"))
    with tenant_session(engine, principal.tenant_id) as session:
        result = memories.create_memory(session, principal, new, digest)
        written = _written(session, result.memory, result.replayed)
    if result.replayed:
        response.status_code = status.HTTP_200_OK
    return written


@router.post("/memory-candidates/{memory_id}/confirm")
def confirm_candidate(memory_id: str, principal: CurrentPrincipal, engine: EngineDep) -> WriteOut:
    """Turn a CANDIDATE into ACTIVE (memory_writer role)."""
    with tenant_session(engine, principal.tenant_id) as session:
        memory = memories.confirm_candidate(session, principal, _memory_id(memory_id))
        return _written(session, memory, replayed=False)


@router.get("/memories/{memory_id}")
def read_memory(
    memory_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    version: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
) -> MemoryDetailOut:
    """The current version (or ``?version=N``) with its provenance and version history."""
    return service.read_memory(engine, principal, _memory_id(memory_id), version)


@router.patch("/memories/{memory_id}")
def correct_memory(memory_id: str, body: CorrectionIn, principal: CurrentPrincipal, engine: EngineDep) -> MemoryOut:
    """Correct a memory: a new version supersedes the current one. A stale ``expected_version`` is a 409."""
    return service.correct_memory(engine, principal, _memory_id(memory_id), body)


@router.post("/memories/{memory_id}/expire")
def expire_memory(memory_id: str, principal: CurrentPrincipal, engine: EngineDep) -> MemoryOut:
    """Expire: stop using the memory as a basis for answers. Unlike DELETE it stays (and can be audited);
    unlike PATCH it adds no new fact."""
    return service.expire_memory(engine, principal, _memory_id(memory_id))


@router.post(
    "/memories/{memory_id}/promotions",
    status_code=status.HTTP_201_CREATED,
    response_model=PromotionOut,
    responses=replay_of(PromotionOut),
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": PROMOTION_SCHEMA}}}},
)
async def promote_memory(memory_id: str, body: Annotated[dict[str, Any], Body()], principal: CurrentPrincipal,
                         engine: EngineDep, settings: SettingsDep, temporal: TemporalSource,
                         response: Response) -> PromotionOut:
    """Propose this memory as knowledge (or as a change to a skill): a candidate and its review open, nothing is
    written until a knowledge reviewer approves. The answer says what was proposed and where it waits; the same
    promotion again answers 200 with the same candidate."""
    answer, created = await promotions.promote(temporal, engine, settings.task_queue,
                                               knowledge.review_policy(settings), principal, _memory_id(memory_id),
                                               body)
    if not created:
        response.status_code = status.HTTP_200_OK
    return answer
