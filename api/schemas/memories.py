"""Memories: what a caller submits or corrects, and a memory as it is read back."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, Field

from api.schemas.common import INT32_MAX, Content, Integer, Lax, ShortText, StrictRequest, Timestamp, json_number
from memory.enums import Category, SourceLevel, Space
from memory.models import Memory
from memory.store.message_text import SaidMessage


class SourceIn(StrictRequest):
    source_id: ShortText
    source_type: ShortText
    captured_at: Timestamp
    evidence_refs: list[ShortText] = Field(default_factory=list, max_length=50)


class ValidityIn(StrictRequest):
    observed_at: Timestamp | None = None
    effective_from: Timestamp | None = None
    effective_to: Timestamp | None = None
    expires_at: Timestamp | None = None


class RepliedMessageIn(StrictRequest):
    """The message a message answers, quoted in the memory's content."""

    speaker: ShortText
    text: Annotated[str, Field(max_length=100_000)]
    shared: list[Annotated[str, Field(min_length=1, max_length=2_000)]] = Field(default_factory=list, max_length=20)
    """What was shared with the message, each as a description (an image's caption)."""

    def said(self) -> SaidMessage:
        return SaidMessage(self.speaker, self.text, tuple(self.shared))


class MessageIn(RepliedMessageIn):
    """A message someone said: mnemo writes the memory's content from it (memory/store/message_text.py)."""

    replying_to: RepliedMessageIn | None = None
    """The message this one answers (a reply alone, "Yes, at the park!", says little a question could find)."""

    def said(self) -> SaidMessage:
        return replace(super().said(), replying_to=self.replying_to.said() if self.replying_to else None)


class CandidateIn(StrictRequest):
    category: Annotated[Category, Lax]
    space: Annotated[Space, Lax]
    content: Content | None = None
    """The memory's text; or give ``message`` instead, and mnemo writes it from who said what."""
    message: MessageIn | None = None
    source: SourceIn
    source_level: Annotated[SourceLevel, Lax]
    abstract: Annotated[str, Field(min_length=1, max_length=1_000)] | None = None
    overview: Annotated[str, Field(min_length=1, max_length=20_000)] | None = None
    key: ShortText | None = None
    project_id: ShortText | None = None
    session_id: ShortText | None = None
    confidence: Annotated[float, Field(ge=0, le=1), BeforeValidator(json_number)] | None = None
    validity: ValidityIn | None = None
    allowed_purposes: list[ShortText] = Field(default_factory=list, max_length=20)
    idempotency_key: ShortText | None = None


class CorrectionIn(StrictRequest):
    expected_version: Integer = Field(ge=1, le=INT32_MAX)
    content: Content | None = None
    abstract: Annotated[str, Field(min_length=1, max_length=1_000)] | None = None
    overview: Annotated[str, Field(min_length=1, max_length=20_000)] | None = None
    key: ShortText | None = None
    source: SourceIn | None = None
    source_level: Literal[SourceLevel.E1, SourceLevel.E2, SourceLevel.E3] = SourceLevel.E2
    confidence: Annotated[float, Field(ge=0, le=1), BeforeValidator(json_number)] | None = None
    validity: ValidityIn | None = None
    allowed_purposes: list[ShortText] | None = Field(default=None, max_length=20)


class SourceOut(BaseModel):
    source_id: str
    source_type: str
    captured_at: AwareDatetime
    evidence_refs: list[str]


class ValidityOut(BaseModel):
    observed_at: AwareDatetime | None
    effective_from: AwareDatetime | None
    effective_to: AwareDatetime | None
    expires_at: AwareDatetime | None
    last_confirmed_at: AwareDatetime | None


class MemoryOut(BaseModel):
    memory_id: uuid.UUID
    version: int
    status: str
    category: str
    space: str
    owner_id: str
    key: str | None
    project_id: str | None
    session_id: str | None
    abstract: str
    overview: str | None
    content: str
    source: SourceOut
    source_level: str
    confidence: float
    validity: ValidityOut
    allowed_purposes: list[str]
    supersedes_version: int | None
    stored_at: AwareDatetime
    revision: int

    @classmethod
    def of(cls, memory: Memory) -> MemoryOut:
        return cls(
            memory_id=memory.memory_id,
            version=memory.version,
            status=memory.status,
            category=memory.category,
            space=memory.space,
            owner_id=memory.owner_id,
            key=memory.key,
            project_id=memory.project_id,
            session_id=memory.session_id,
            abstract=memory.abstract,
            overview=memory.overview,
            content=memory.content,
            source=SourceOut(
                source_id=memory.source_id,
                source_type=memory.source_type,
                captured_at=memory.captured_at,
                evidence_refs=list(memory.evidence_refs),
            ),
            source_level=memory.source_level,
            confidence=memory.confidence,
            validity=ValidityOut(
                observed_at=memory.observed_at,
                effective_from=memory.effective_from,
                effective_to=memory.effective_to,
                expires_at=memory.expires_at,
                last_confirmed_at=memory.last_confirmed_at,
            ),
            allowed_purposes=list(memory.allowed_purposes),
            supersedes_version=memory.supersedes_version,
            stored_at=memory.stored_at,
            revision=memory.revision,
        )


class WriteOut(BaseModel):
    memory_id: uuid.UUID
    version: int
    status: str
    stage: Literal["searchable", "indexed"]
    """``searchable``: committed and in the lexical indexes (recall finds it by its words); ``indexed``: its
    vector exists too (recall finds it by meaning)."""
    indexes: dict[Literal["lexical", "vector"], Literal["indexed", "pending"]]
    vector_expected_within_seconds: int | None
    """While the vector is pending: the embedding sweep's period, within which (plus its batch) it is written;
    until then a recall ranks the memory by its words only. None once indexed."""
    replayed: bool
    revision: int


class VersionSummary(BaseModel):
    version: int
    status: str
    stored_at: AwareDatetime


class MemoryDetailOut(MemoryOut):
    history: list[VersionSummary]

    @classmethod
    def of_versions(cls, memory: Memory, versions: list[Memory]) -> MemoryDetailOut:
        """``memory`` with the version history ``versions`` (GET /memories/{id} and MCP get_memory_detail)."""
        return cls(
            **MemoryOut.of(memory).model_dump(),
            history=[VersionSummary(version=m.version, status=m.status, stored_at=m.stored_at) for m in versions],
        )
