"""Memories: candidates, confirmation, reads, corrections and recall (the memory bundle)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import JSONResponse

from api.deps import CurrentPrincipal, EngineDep, PresentedKey
from api.routers import recall
from api.schemas import (
    INT32_MAX,
    CandidateIn,
    CorrectionIn,
    MemoryDetailOut,
    MemoryOut,
    RecallIn,
    SourceIn,
    ValidityIn,
    VersionSummary,
    WriteOut,
)
from memory import memories
from memory.db import tenant_session
from memory.errors import NotFound
from memory.events import request_digest
from memory.models import Memory

router = APIRouter(tags=["memories"])


def _memory_id(raw: str) -> uuid.UUID:
    """A malformed id is just an id that does not exist: the same 404, never a 422."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NotFound(f"memory {raw} does not exist") from None


def _source(source: SourceIn) -> memories.Source:
    return memories.Source(source.source_id, source.source_type, source.captured_at, tuple(source.evidence_refs))


def _validity(validity: ValidityIn | None) -> memories.Validity | None:
    if validity is None:
        return None
    return memories.Validity(validity.observed_at, validity.effective_from, validity.effective_to, validity.expires_at)


def _written(memory: Memory, replayed: bool) -> WriteOut:
    # The lexical projection is written in the same transaction as the row, so a
    # committed write is already searchable.
    return WriteOut(
        memory_id=memory.memory_id,
        version=memory.version,
        status=memory.status,
        stage="indexed",
        indexes={"lexical": "indexed", "vector": "pending"},
        replayed=replayed,
        revision=memory.revision,
    )


@router.post(
    "/memory-candidates",
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": WriteOut, "description": "A replay of the same idempotency key and body: the first result"}},
)
def submit_candidate(body: CandidateIn, principal: CurrentPrincipal, engine: EngineDep, response: Response) -> WriteOut:
    """Submit a memory. It is ACTIVE at once for a memory writer with E1–E3 evidence, else a CANDIDATE."""
    new = memories.NewMemory(
        category=body.category,
        space=body.space,
        content=body.content,
        source=_source(body.source),
        source_level=body.source_level,
        abstract=body.abstract,
        overview=body.overview,
        key=body.key,
        project_id=body.project_id,
        session_id=body.session_id,
        confidence=body.confidence,
        validity=_validity(body.validity) or memories.Validity(),
        allowed_purposes=tuple(body.allowed_purposes),
        idempotency_key=body.idempotency_key,
    )
    digest = request_digest(body.model_dump(mode="json"))
    with tenant_session(engine, principal.tenant_id) as session:
        result = memories.create_memory(session, principal, new, digest)
    if result.replayed:
        response.status_code = status.HTTP_200_OK
    return _written(result.memory, result.replayed)


@router.post("/memory-candidates/{memory_id}/confirm")
def confirm_candidate(memory_id: str, principal: CurrentPrincipal, engine: EngineDep) -> WriteOut:
    """Turn a CANDIDATE into ACTIVE (memory_writer role)."""
    with tenant_session(engine, principal.tenant_id) as session:
        memory = memories.confirm_candidate(session, principal, _memory_id(memory_id))
    return _written(memory, replayed=False)


@router.get("/memories/{memory_id}")
def read_memory(
    memory_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    version: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
) -> MemoryDetailOut:
    """The current version (or ``?version=N``) with its provenance and version history."""
    parsed = _memory_id(memory_id)
    with tenant_session(engine, principal.tenant_id) as session:
        if version is None:
            memory = memories.head_of(session, principal, parsed)
        else:
            memory = memories.version_of(session, principal, parsed, version)
        versions = memories.history(session, principal, parsed)
    return MemoryDetailOut(
        **MemoryOut.of(memory).model_dump(),
        history=[VersionSummary(version=m.version, status=m.status, stored_at=m.stored_at) for m in versions],
    )


@router.patch("/memories/{memory_id}")
def correct_memory(memory_id: str, body: CorrectionIn, principal: CurrentPrincipal, engine: EngineDep) -> MemoryOut:
    """Correct a memory: a new version supersedes the current one. A stale ``expected_version`` is a 409."""
    correction = memories.Correction(
        expected_version=body.expected_version,
        content=body.content,
        abstract=body.abstract,
        overview=body.overview,
        key=body.key,
        source=_source(body.source) if body.source else None,
        source_level=body.source_level,
        confidence=body.confidence,
        validity=_validity(body.validity),
        allowed_purposes=tuple(body.allowed_purposes) if body.allowed_purposes is not None else None,
    )
    with tenant_session(engine, principal.tenant_id) as session:
        memory = memories.correct_memory(session, principal, _memory_id(memory_id), correction)
    return MemoryOut.of(memory)


@router.post("/memory-query", response_model=dict[str, Any], responses={429: {"description": "tenant_busy"}})
async def query_memories(body: RecallIn, key: PresentedKey, engine: EngineDep, request: Request) -> JSONResponse:
    """Recall: a memory bundle (plan, hard filters, hybrid candidates, explained scores, conflicts, budget).

    Returned as a ready JSONResponse: the bundle holds only JSON types already, and FastAPI's generic
    encoder walking it again cost ~1 ms a request.
    """
    return JSONResponse(await recall.build(body, key, engine, request))
