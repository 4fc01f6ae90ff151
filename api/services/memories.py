"""Reading, correcting and expiring one memory: what ``/memories/{id}`` and the console's memory page share."""

from __future__ import annotations

import uuid

from sqlalchemy import Engine

from api.schemas.memories import CandidateIn, CorrectionIn, MemoryDetailOut, MemoryOut, SourceIn, ValidityIn
from memory.db import tenant_session
from memory.errors import InvalidInput
from memory.identity.auth import PrincipalContext
from memory.store import memories
from memory.store.message_text import message_content, quote_start


def source_of(source: SourceIn) -> memories.Source:
    """The domain's source of a request's ``source``."""
    return memories.Source(source.source_id, source.source_type, source.captured_at, tuple(source.evidence_refs))


def validity_of(validity: ValidityIn | None) -> memories.Validity | None:
    """The domain's validity of a request's ``validity`` (None when it names none)."""
    if validity is None:
        return None
    return memories.Validity(validity.observed_at, validity.effective_from, validity.effective_to, validity.expires_at)


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


def new_memory_of(body: CandidateIn) -> memories.NewMemory:
    """The domain's new memory of a ``POST /memory-candidates`` body (one item of a batch alike)."""
    content, quoted_from = _content(body)
    return memories.NewMemory(
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


def read_memory(engine: Engine, principal: PrincipalContext, memory_id: uuid.UUID, version: int | None = None
                ) -> MemoryDetailOut:
    """The current version (or ``version``) with its provenance and version history."""
    with tenant_session(engine, principal.tenant_id) as session:
        if version is None:
            memory = memories.head_of(session, principal, memory_id)
        else:
            memory = memories.version_of(session, principal, memory_id, version)
        versions = memories.history(session, principal, memory_id)
    return MemoryDetailOut.of_versions(memory, versions)


def correct_memory(engine: Engine, principal: PrincipalContext, memory_id: uuid.UUID, body: CorrectionIn) -> MemoryOut:
    """A new version superseding the current one; a stale ``expected_version`` is a 409."""
    correction = memories.Correction(
        expected_version=body.expected_version,
        content=body.content,
        abstract=body.abstract,
        overview=body.overview,
        key=body.key,
        source=source_of(body.source) if body.source else None,
        source_level=body.source_level,
        confidence=body.confidence,
        validity=validity_of(body.validity),
        allowed_purposes=tuple(body.allowed_purposes) if body.allowed_purposes is not None else None,
    )
    with tenant_session(engine, principal.tenant_id) as session:
        memory = memories.correct_memory(session, principal, memory_id, correction)
    return MemoryOut.of(memory)


def expire_memory(engine: Engine, principal: PrincipalContext, memory_id: uuid.UUID) -> MemoryOut:
    """Stop using the memory as a basis for answers; it stays (and can be audited)."""
    with tenant_session(engine, principal.tenant_id) as session:
        memory = memories.expire_memory(session, principal, memory_id)
    return MemoryOut.of(memory)
