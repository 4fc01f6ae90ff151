"""Request and response bodies of ``/knowledge-candidates`` and ``/knowledge``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from api.schemas.common import MAX_SAFE_INTEGER, Integer, StrictRequest
from api.schemas.tasks import SHA256, Reason
from memory.knowledge.content import MAX_CLAIM_CHARS
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem

CANDIDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A proposed piece of knowledge: redacted, compared with published knowledge and reviewed by a "
                   "person before anyone recalls it. Every problem is named by path in details.problems "
                   "(422 knowledge_candidate_invalid)",
    "required": ["authority", "source_refs"],
    "additionalProperties": False,
    "properties": {
        "key": {"type": "string", "examples": ["report.publish_policy"]},
        "claim": {"type": "string", "maxLength": MAX_CLAIM_CHARS},
        "authority": {"type": "string", "enum": ["P0", "P1", "P2", "P3"]},
        "scope": {"type": "object", "properties": {"type": {"type": "string", "enum": ["TENANT", "PROJECT"]},
                                                   "project_id": {"type": "string"}}},
        "source_refs": {"type": "array", "items": {"type": "string"}, "examples": [["doc:finance-handbook#4"]]},
        "evidence": {"type": "array", "items": {"type": "object"}},
        "validity": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}},
        "structured": {"type": "object", "description": "An incident: kind, symptom, root_cause, fix, ..."},
        "supersedes": {"type": "string", "format": "uuid", "description": "The item (knowledge_id) it replaces"},
        "target": {"type": "string", "enum": ["knowledge", "skill"]},
        "skill_name": {"type": "string", "description": "The skill a change of target skill is for"},
        "idempotency_key": {"type": "string", "maxLength": 200,
                            "description": "The same key again answers the first candidate (another body: 409)"},
    },
}
REVISION_SCHEMA: dict[str, Any] = {
    **CANDIDATE_SCHEMA,
    "description": "The author's whole new content after request_changes, with the version it revises",
    "required": ["version", *CANDIDATE_SCHEMA["required"]],
    "properties": {**{k: v for k, v in CANDIDATE_SCHEMA["properties"].items() if k != "idempotency_key"},
                   "version": {"type": "integer", "minimum": 1, "maximum": MAX_SAFE_INTEGER}},
}


class Scope(BaseModel):
    type: str
    project_id: str | None = None


class Validity(BaseModel):
    from_: datetime | None = Field(default=None, alias="from")
    to: datetime | None = None


class CandidateCreatedOut(BaseModel):
    candidate_id: str
    status: str
    version: int
    content_sha256: str
    redactions: list[dict[str, str]] = Field(description="What was redacted, by kind and path; never the value")
    duplicates: list[dict[str, Any]]
    conflicts: list[dict[str, Any]]


class Content(BaseModel):
    """What a candidate proposes and an item publishes."""

    key: str | None
    claim: str
    structured: dict[str, Any] | None
    authority: str
    scope: Scope
    source_refs: list[str]
    evidence: list[dict[str, Any]]
    validity: Validity

    @staticmethod
    def fields_of(row: KnowledgeCandidate | KnowledgeItem) -> dict[str, Any]:
        return {"key": row.key, "claim": row.claim, "structured": row.structured, "authority": row.authority,
                "scope": Scope(type=row.scope_type, project_id=row.project_id),
                "source_refs": list(row.source_refs), "evidence": row.evidence,
                "validity": Validity.model_validate({"from": row.valid_from, "to": row.valid_to})}


class CandidateOut(Content, CandidateCreatedOut):
    """Everything a reviewer sees: the content, what was redacted, duplicates and conflicts, the deadline."""

    state_version: int
    supersedes: str | None
    target: str
    skill_name: str | None
    origin: str
    author_user_id: str
    author_agent_id: str | None
    review_deadline: datetime | None
    reminders_sent: int
    decision: str | None
    decision_reason: str | None
    decided_by: str | None
    decided_at: datetime | None
    knowledge_id: str | None
    knowledge_version: int | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, c: KnowledgeCandidate, claims: Mapping[str, str]) -> CandidateOut:
        """``claims``: the conflicting items' claims (:func:`memory.knowledge.candidates.conflict_claims`)."""
        conflicts = [{**k, "claim": claims.get(f"{k['knowledge_id']}@{k['version']}", "")} for k in c.conflicts]
        return cls(
            **Content.fields_of(c), candidate_id=str(c.candidate_id), status=c.status, version=c.version,
            state_version=c.state_version, content_sha256=c.content_sha256, redactions=c.redactions,
            duplicates=c.duplicates, conflicts=conflicts, supersedes=str(c.supersedes) if c.supersedes else None,
            target=c.target, skill_name=c.skill_name,
            origin=c.origin, author_user_id=c.author_user_id, author_agent_id=c.author_agent_id,
            review_deadline=c.review_deadline, reminders_sent=c.reminders_sent, decision=c.decision,
            decision_reason=c.decision_reason, decided_by=c.decided_by, decided_at=c.decided_at,
            knowledge_id=str(c.knowledge_id) if c.knowledge_id else None, knowledge_version=c.knowledge_version,
            created_at=c.created_at, updated_at=c.updated_at,
        )


class CandidateListOut(BaseModel):
    items: list[CandidateOut]


class ReviewIn(StrictRequest):
    decision: Literal["approve", "reject", "request_changes"]
    content_sha256: SHA256 = Field(description="The content_sha256 you reviewed")
    state_version: Integer = Field(ge=1, le=MAX_SAFE_INTEGER, description="The state_version you reviewed")
    reason: Reason | None = Field(default=None, description="Needed to reject or request changes; redacted before "
                                                            "it is stored")
    authority: Literal["P0", "P1", "P2", "P3"] | None = Field(
        default=None, description="With an approval: the authority you publish it with (default: the candidate's; "
                                  "a key bound to an agent proposes P3, which only a reviewer raises)")


REVISED_VERSION: TypeAdapter[int] = TypeAdapter(Annotated[Integer, Field(ge=1, le=MAX_SAFE_INTEGER)])
"""The ``version`` a revision names (beside the candidate's content in one body)."""


class KnowledgeItemOut(Content):
    knowledge_id: str
    version: int
    status: str
    candidate_id: str
    author_user_id: str
    reviewer_user_id: str
    published_at: datetime
    supersedes_version: int | None
    content_sha256: str
    withdrawn_reason: str | None
    embedding_model: str | None = Field(description="None: published without a vector (no embedder configured)")

    @classmethod
    def of(cls, i: KnowledgeItem) -> KnowledgeItemOut:
        return cls(
            **Content.fields_of(i), knowledge_id=str(i.knowledge_id), version=i.version, status=i.status,
            candidate_id=str(i.candidate_id), author_user_id=i.author_user_id, reviewer_user_id=i.reviewer_user_id,
            published_at=i.published_at, supersedes_version=i.supersedes_version, content_sha256=i.content_sha256,
            withdrawn_reason=i.withdrawn_reason, embedding_model=i.embedding_model,
        )


class ReviewOut(BaseModel):
    candidate: CandidateOut
    knowledge: KnowledgeItemOut | None = Field(default=None, description="What an approval published")
    replayed: bool = Field(description="True: this reviewer's same decision was already recorded")


class KnowledgeListOut(BaseModel):
    items: list[KnowledgeItemOut]


class KnowledgeVersionsOut(BaseModel):
    knowledge_id: str
    versions: list[KnowledgeItemOut] = Field(description="Every version, newest first")


PROMOTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Propose this memory (a CASE or PATTERN that worked, a tool experience, a skill execution) as "
                   "knowledge, or as a change to a skill: it opens a candidate and its review, never a direct write. "
                   "Every field is optional: the claim, key and scope default to the memory's",
    "properties": {
        "target": {"type": "string", "enum": ["knowledge", "skill"]},
        "skill_name": {"type": "string", "description": "The skill a change of target skill is for"},
        "claim": {"type": "string", "maxLength": MAX_CLAIM_CHARS},
        "key": {"type": "string"},
        "authority": {"type": "string", "enum": ["P2", "P3"], "description": "At most P2 (default)"},
        "scope": CANDIDATE_SCHEMA["properties"]["scope"],
        "validity": CANDIDATE_SCHEMA["properties"]["validity"],
    },
}


class WaitsOut(BaseModel):
    """Where the proposal waits: its candidate's review, and where a reviewer decides on it."""

    status: str
    review_workflow_id: str
    api: str
    console: str
    review_deadline: datetime | None


class PromotionOut(BaseModel):
    """What was proposed (after redaction, with its authority as capped) and where it waits."""

    memory_id: str
    memory_version: int
    target: str
    skill_name: str | None
    candidate: CandidateCreatedOut
    proposed: dict[str, Any] = Field(description="key, claim, authority, scope and source_refs as the reviewer "
                                                 "will read them")
    authority_capped: bool = Field(description="True: the authority asked for was lowered (an agent's key "
                                               "promoting a model's inference proposes it as P3)")
    waits: WaitsOut
