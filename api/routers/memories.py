"""Memories: candidates, confirmation, reads, corrections and expiry (recall is api/routers/recall.py)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response, status
from sqlalchemy.orm import Session

from api.admission import batch_slots
from api.deps import CurrentPrincipal, EngineDep, SettingsDep, TemporalSource
from api.schemas.batches import BatchIn, batch_model, item_model
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
from api.services.batches import batch_answer, parse_items
from api.services.memories import new_memory_of
from memory.db import tenant_session
from memory.errors import MnemoError
from memory.identity.ids import parse_id
from memory.models import Memory
from memory.store import memories
from memory.store.events import request_digest
from memory.store.projection import has_vector
from workflows.embedding import SWEEP_EVERY as EMBEDDING_SWEEP_EVERY

router = APIRouter(tags=["memories"])

WriteItemOut = item_model(WriteOut)
WriteBatchOut = batch_model(WriteItemOut)


def _memory_id(raw: str) -> uuid.UUID:
    return parse_id(raw, "memory")


def _written(session: Session, memory: Memory, replayed: bool, *, fresh: bool = False) -> WriteOut:
    """What is searchable now: the lexical projection is written in the write's own transaction; the vector
    comes from the embedding sweep (a replay or a confirmation may find it already there; a ``fresh`` write,
    whose projection was just written with no vector, cannot)."""
    vector = not fresh and has_vector(session, memory)
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


def _item(body: CandidateIn) -> tuple[memories.NewMemory, str]:
    return new_memory_of(body), request_digest(body.model_dump(mode="json"))


@router.post(
    "/memory-candidates",
    status_code=status.HTTP_201_CREATED,
    responses=replay_of(WriteOut),
)
def submit_candidate(body: CandidateIn, principal: CurrentPrincipal, engine: EngineDep, response: Response) -> WriteOut:
    """Submit a memory. It is ACTIVE at once for a memory writer with E1-E3 evidence, else a CANDIDATE."""
    new, digest = _item(body)
    with tenant_session(engine, principal.tenant_id) as session:
        result = memories.create_memory(session, principal, new, digest)
        written = _written(session, result.memory, result.replayed, fresh=not result.replayed)
    if result.replayed:
        response.status_code = status.HTTP_200_OK
    return written


@router.post("/memory-candidates:batch", response_model=WriteBatchOut, response_model_exclude_unset=True)
def submit_candidates(body: BatchIn, principal: CurrentPrincipal, engine: EngineDep, request: Request
                      ) -> dict[str, Any]:
    """Submit up to 500 memories in one transaction, each as ``POST /memory-candidates`` would: per item, in
    order, ``committed``, ``replayed`` (the first result) or ``error`` (that item alone; nothing of it is
    stored). The lexical projection is written with them; the vectors follow from the embedding sweep."""
    items = parse_items(body.items, CandidateIn, _item)
    with batch_slots(request.app.state, "write", principal.tenant_id, len(items)), \
            tenant_session(engine, principal.tenant_id) as session:
        results = memories.create_memories(session, principal, items)
        answers = [r if isinstance(r, MnemoError) else
                   (_written(session, r.memory, r.replayed, fresh=not r.replayed), r.replayed) for r in results]
    return batch_answer(WriteItemOut, answers)


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
