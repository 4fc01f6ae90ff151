"""Recall: what a caller asks (:class:`RecallIn`), the memory bundle it gets, its prompt text and its audit events.

The bundle models document the JSON :func:`bundle_body` makes of the typed bundle
(:class:`memory.recall.bundle_types.Bundle`); the route returns that body without validating it again (see
api/routers/recall.py). Conflict decisions and conflict claims take several shapes, one per rule.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from api.schemas.common import MAX_SAFE_INTEGER, Integer, Lax, Number, ShortText, StrictRequest, json_integer
from api.schemas.skills import ProvenanceOut
from memory.enums import Category, Space
from memory.knowledge.recall import KnowledgeEntry
from memory.recall.bundle_types import (
    Bundle,
    BundleItem,
    Conflict,
    Explain,
    NotApplicable,
    PreferenceSource,
    TaskState,
)
from memory.recall.plan import DEFAULT_SKILL_BUDGET, RESUME_CANDIDATES, RecallPlan
from memory.recall.skills import BundleSkill
from memory.tasks.resumable import ResumableTask

IntentName = Literal["RESUME_TASK", "ANSWER", "CHITCHAT", "OPERATE"]


class RecallIn(StrictRequest):
    """POST /memory-query and /recall/render. Identity comes from the key; these fields only narrow or steer."""

    query: Annotated[str, Field(min_length=1, max_length=2_000)]
    limit: Integer = Field(default=5, ge=1, le=50)
    """How many memories may be injected (seed 001 §6.4 default 5)."""
    candidate_limit: Integer = Field(default=20, ge=1, le=200)
    token_budget: Integer = Field(default=1_500, ge=16, le=100_000)
    skill_token_budget: Integer = Field(default=DEFAULT_SKILL_BUDGET, ge=16, le=100_000, description=(
        "OPERATE: the skills section's own token quota, apart from token_budget (the memories')"))
    categories: list[Annotated[Category, Lax]] = Field(default_factory=list)
    spaces: list[Annotated[Space, Lax]] = Field(default_factory=list)
    project_id: ShortText | None = None
    session_id: ShortText | None = None
    purpose: ShortText | None = None
    intent: IntentName | None = None
    task_id: ShortText | None = None
    request_constraints: dict[ShortText, ShortText] = Field(default_factory=dict, max_length=20)
    keys: list[ShortText] = Field(default_factory=list, max_length=20)
    min_relevance: Number = Field(default=0.05, ge=0, le=1)
    min_revision: Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER), BeforeValidator(json_integer)] | None = None
    explain: bool = False
    trace_id: ShortText | None = None
    retrieval: Literal["hybrid", "lexical", "semantic"] = "hybrid"
    """Which candidate sources and relevance signals recall uses: ``hybrid`` (all, the default), ``lexical``
    (exact key, full text and trigram; no query embedding) or ``semantic`` (vector search alone). For ablations
    and diagnosis: every mode runs inside the same hard filters."""


class PlanSourceOut(BaseModel):
    type: Literal["REQUEST_CONSTRAINTS", "TASK_STATE", "USER_PROFILE", "MEMORY", "SKILLS", "KNOWLEDGE"]
    limit: int
    required: bool


class PlanOut(BaseModel):
    sources: list[PlanSourceOut]
    candidate_limit: int
    inject_limit: int
    token_budget: int
    skill_token_budget: int
    knowledge_token_budget: int = Field(description="Tokens of published knowledge, a quota of its own")


class ConstraintOut(BaseModel):
    key: str
    value: str
    source: Literal["CURRENT_REQUEST"]


class PreferenceSourceOut(BaseModel):
    """Where an effective preference comes from: a product default, a stored preference (its id and version) or
    the request."""

    source: Literal["PRODUCT_DEFAULT", "GLOBAL", "PROJECT", "SESSION", "CURRENT_REQUEST"]
    memory_id: str | None = None
    version: int | None = None


class TaskStateOut(BaseModel):
    """The live task of a RESUME_TASK recall."""

    task_id: str
    status: str
    current_step_id: str | None
    state_version: int
    waiting_reason: str | None
    published: bool = Field(description="A publication of the result is confirmed (false: never say it was)")


class TaskCandidateOut(BaseModel):
    """One of the caller's resumable tasks (not terminal), listed when a RESUME_TASK recall names no task_id."""

    task_id: str
    task_type: str
    status: str
    waiting_reason: str | None
    updated_at: str = Field(json_schema_extra={"format": "date-time"})
    goal_summary: str = Field(description="The goal in one line, to tell tasks apart (`currency CNY, month 2026-06`)")


class BundleItemOut(BaseModel):
    memory_id: str
    version: int
    category: str
    status: str
    space: str
    key: str | None
    content: str
    abstract: str
    applicability: str
    source_refs: list[str]
    source_level: str
    observed_at: str | None = Field(json_schema_extra={"format": "date-time"})
    revision: int
    score: float = Field(description=(
        "How this memory ranks against the other candidates of this recall: z-scores of BM25 and the cosine "
        "within the pool plus small priors, so 0 is the pool's average and scores do not compare across queries. "
        "score_breakdown.relevance (0-1) is the absolute measure that min_relevance cuts at; an unrelated memory "
        "is left out and listed in not_applicable, so in a hybrid recall a negative score means the memory's "
        "words matched, weakly."))
    score_breakdown: dict[str, float | None]
    matched_by: list[str]


class SkillFieldOut(BaseModel):
    name: str
    value: str | list[str]
    source: ProvenanceOut = Field(description="The layer whose value won the field")


class BundleSkillOut(BaseModel):
    """A skill an OPERATE request is about, resolved for the caller (SYSTEM → TENANT → AGENT overlay): a
    procedure to follow, not a memory."""

    name: str
    layers: list[ProvenanceOut]
    fields: list[SkillFieldOut]
    omitted: list[str] = Field(description="Fields the skills quota had no room for")
    outcomes: dict[str, int] = Field(description=(
        "Runs of the skill as it resolves now, by outcome (succeeded, failed, partial): the caller's agent's "
        "SKILL_EXECUTION memories of these layers (POST /sessions/{id}/messages skill_execution, then commit)"))


class KnowledgeScopeOut(BaseModel):
    type: Literal["TENANT", "PROJECT"]
    project_id: str | None


class KnowledgeValidityOut(BaseModel):
    valid_from: str | None = Field(json_schema_extra={"format": "date-time"})
    valid_to: str | None = Field(json_schema_extra={"format": "date-time"})


class KnowledgeEntryOut(BaseModel):
    """A published, reviewed knowledge item (P0-P2, ACTIVE, in scope and validity): a fact, with its version."""

    knowledge_id: str
    version: int
    key: str | None
    claim: str
    authority: Literal["P0", "P1", "P2"]
    scope: KnowledgeScopeOut
    validity: KnowledgeValidityOut
    source_refs: list[str]
    score: float = Field(description="relevance (0-1: exact key 1, full text, trigram, cosine above 0.85) plus the "
                         "authority prior (P0 0.2, P1 0.1, P2 0); ranks knowledge only, never against memories")
    score_breakdown: dict[str, float]
    matched_by: list[str]


class NotApplicableOut(BaseModel):
    memory_id: str
    version: int
    reason: Literal["below_relevance_floor", "vector_only_below_average"] = Field(description=(
        "below_relevance_floor: relevance under min_relevance; vector_only_below_average: a hybrid recall found it "
        "by its vector alone and it scores below the average candidate (unrelated short texts sit as close as a "
        "paraphrase for the bundled model). min_relevance 0 keeps every candidate."))


class ExplainedCandidateOut(BaseModel):
    rank: int
    memory_id: str
    version: int
    matched_by: list[str]
    breakdown: dict[str, float | None]


class ExplainOut(BaseModel):
    candidates: list[ExplainedCandidateOut]
    filtered_by_reason: dict[str, int]


class BundleOut(BaseModel):
    """The memory bundle: published knowledge (reviewed facts, never a candidate or a P3 item) and items (the
    memories the caller may use, tenant and system ones included), with how they were chosen. ``explain`` only
    when asked for."""

    trace_id: str
    intent: IntentName
    plan: PlanOut
    request_constraints: list[ConstraintOut]
    effective_preferences: dict[str, str]
    preference_sources: dict[str, PreferenceSourceOut]
    task_state: TaskStateOut | None
    task_candidates: list[TaskCandidateOut] = Field(description=(
        "RESUME_TASK without a task_id: the caller's resumable tasks, most recently changed first (at most "
        f"{RESUME_CANDIDATES}). "
        "One: task_state is its live state. Several: task_state is null and needs_task_choice is true: ask the "
        "user which one, never guess. None: a warning says so. Empty when a task_id was given."))
    needs_task_choice: bool
    knowledge: list[KnowledgeEntryOut] = Field(description=(
        "Published knowledge P0-P2 in the request's scope (TENANT, or PROJECT of project_id) and validity, in its "
        "own token quota. A superseded or expired item the query matched is a warning, never here."))
    items: list[BundleItemOut]
    skills: list[BundleSkillOut] = Field(description="OPERATE only: the skills the request is about")
    skills_truncated_by_budget: bool
    conflict_decisions: list[dict[str, Any]]
    conflicts: list[dict[str, Any]]
    warnings: list[str]
    version_vector: dict[str, int]
    snapshot_revision: int
    truncated_by_budget: bool
    not_applicable: list[NotApplicableOut]
    candidates_considered: int
    dropped_on_reread: int
    explain: ExplainOut | None = None


RESUME_SECTIONS = ("intent", "request_constraints", "effective_preferences", "task_state", "task_candidates",
                   "needs_task_choice", "knowledge", "warnings")
"""The bundle's sections an agent resuming a task acts on: MCP's ``search_memories`` answers them as REST does."""


def bundle_body(bundle: Bundle) -> dict[str, object]:
    """The bundle's JSON body, exactly as :class:`BundleOut` names it (built by hand: validating the model for
    each request cost ~1 ms)."""
    body: dict[str, object] = {
        "trace_id": bundle.trace_id,
        "intent": bundle.plan.intent.value,
        "plan": _plan(bundle.plan),
        "request_constraints": [{"key": c.key, "value": c.value, "source": "CURRENT_REQUEST"}
                                for c in bundle.request_constraints],
        "effective_preferences": dict(bundle.effective_preferences),
        "preference_sources": {k: _preference_source(v) for k, v in bundle.preference_sources.items()},
        "task_state": _task_state(bundle.task_state),
        "task_candidates": [_task_candidate(t) for t in bundle.task_candidates],
        "needs_task_choice": bundle.needs_task_choice,
        "knowledge": [knowledge_entry(k) for k in bundle.knowledge],
        "items": [_item(i) for i in bundle.items],
        "skills": [_skill(s) for s in bundle.skills.skills],
        "skills_truncated_by_budget": bundle.skills.truncated,
        "conflict_decisions": list(bundle.conflict_decisions),
        "conflicts": [_conflict(c) for c in bundle.conflicts],
        "warnings": list(bundle.warnings),
        "version_vector": dict(bundle.version_vector),
        "snapshot_revision": bundle.snapshot_revision,
        "truncated_by_budget": bundle.truncated_by_budget,
        "not_applicable": [_not_applicable(n) for n in bundle.not_applicable],
        "candidates_considered": bundle.candidates_considered,
        "dropped_on_reread": bundle.dropped_on_reread,
    }
    if bundle.explain is not None:
        body["explain"] = _explain(bundle.explain)
    return body


def _plan(plan: RecallPlan) -> dict[str, object]:
    return {"sources": [{"type": s.type.value, "limit": s.limit, "required": s.required} for s in plan.sources],
            "candidate_limit": plan.candidate_limit, "inject_limit": plan.inject_limit,
            "token_budget": plan.token_budget, "skill_token_budget": plan.skill_budget,
            "knowledge_token_budget": plan.knowledge_token_budget}


def _preference_source(source: PreferenceSource) -> dict[str, object]:
    """A product default or the request: its scope alone; a stored preference: its memory and version too."""
    if source.memory_id is None:
        return {"source": source.source}
    return {"source": source.source, "memory_id": source.memory_id, "version": source.version}


def _task_state(task: TaskState | None) -> dict[str, object] | None:
    if task is None:
        return None
    return {"task_id": task.task_id, "status": task.status, "current_step_id": task.current_step_id,
            "state_version": task.state_version, "waiting_reason": task.waiting_reason, "published": task.published}


def _task_candidate(task: ResumableTask) -> dict[str, object]:
    return {"task_id": task.task_id, "task_type": task.task_type, "status": task.status,
            "waiting_reason": task.waiting_reason, "updated_at": task.updated_at.isoformat(),
            "goal_summary": task.goal_summary}


def _item(item: BundleItem) -> dict[str, object]:
    return {
        "memory_id": item.memory_id, "version": item.version, "category": item.category, "status": item.status,
        "space": item.space, "key": item.key, "content": item.content, "abstract": item.abstract,
        "applicability": item.applicability, "source_refs": list(item.source_refs), "source_level": item.source_level,
        "observed_at": item.observed_at, "revision": item.revision, "score": item.score,
        "score_breakdown": dict(item.score_breakdown), "matched_by": list(item.matched_by),
    }


def _skill(skill: BundleSkill) -> dict[str, object]:
    return {"name": skill.name, "layers": [asdict(layer) for layer in skill.layers],
            "fields": [{"name": f.name, "value": f.value if isinstance(f.value, str) else list(f.value),
                        "source": asdict(f.source)} for f in skill.fields],
            "omitted": list(skill.omitted), "outcomes": dict(skill.outcomes)}


def knowledge_entry(entry: KnowledgeEntry) -> dict[str, object]:
    return {
        "knowledge_id": entry.knowledge_id, "version": entry.version, "key": entry.key, "claim": entry.claim,
        "authority": entry.authority, "scope": dict(entry.scope), "validity": dict(entry.validity),
        "source_refs": list(entry.source_refs), "score": entry.score, "score_breakdown": dict(entry.score_breakdown),
        "matched_by": list(entry.matched_by),
    }


def _conflict(conflict: Conflict) -> dict[str, object]:
    return {"key": conflict.key, "scope": conflict.scope, "status": conflict.status,
            "candidates": list(conflict.candidates)}


def _not_applicable(left_out: NotApplicable) -> dict[str, object]:
    return {"memory_id": left_out.memory_id, "version": left_out.version, "reason": left_out.reason}


def _explain(explain: Explain) -> dict[str, object]:
    return {
        "candidates": [{"rank": c.rank, "memory_id": c.memory_id, "version": c.version,
                        "matched_by": list(c.matched_by), "breakdown": dict(c.breakdown)}
                       for c in explain.candidates],
        "filtered_by_reason": dict(explain.filtered_by_reason),
    }


class RenderOut(BaseModel):
    text: str = Field(description='The bundle as prompt text; "" when it is empty')
    trace_id: str
    snapshot_revision: int


class AuditPrincipalOut(BaseModel):
    user_id: str
    agent_id: str | None
    key_id: str


class AuditEventOut(BaseModel):
    """One MEMORY_BUNDLE_BUILT event: ids, versions, counts and reasons, hashes of keys and query, never content."""

    audit_id: int
    at: str = Field(json_schema_extra={"format": "date-time"})
    actor: str
    trace_id: str
    principal: AuditPrincipalOut
    purpose: str | None
    intent: str
    query_sha256: str
    selected_refs: list[str]
    filtered_by_reason: dict[str, int]
    decisions: list[dict[str, str | None]]
    conflicts: list[str | None]
    snapshot_revision: int
    truncated_by_budget: bool


class AuditEventsOut(BaseModel):
    events: list[AuditEventOut]
