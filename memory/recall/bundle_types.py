"""The memory bundle as typed values: what recall returns, what render, audit and the API read.

Frozen, so a stage cannot change a bundle another stage already handed on. The JSON a caller receives is
mapped from these by :func:`api.schemas.recall.bundle_body`; conflict decisions keep one JSON shape per
rule (seed 003 §11), so they stay :data:`JsonObject`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from memory.knowledge.recall import KnowledgeEntry
from memory.recall.plan import RecallPlan
from memory.recall.scoring import Scored
from memory.recall.skills import NO_SKILLS, SkillSection
from memory.tasks.resumable import ResumableTask

JsonValue: TypeAlias = str | int | float | bool | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
JsonObject: TypeAlias = Mapping[str, JsonValue]
"""A JSON object as a rule wrote it (its keys in its own order)."""


@dataclass(frozen=True)
class TaskState:
    """The live task of a RESUME_TASK recall, as its workflow reported it."""

    task_id: str
    status: str
    current_step_id: str | None
    state_version: int
    waiting_reason: str | None = None
    published: bool = False
    """A publication of the task's result is confirmed: until then the agent must not say it was published."""


@dataclass(frozen=True)
class TaskFound:
    """What a RESUME_TASK recall's task source read: the live task (the named one, or the caller's only resumable
    one) and, when the request named none, the caller's resumable tasks (None: it named one)."""

    state: TaskState | None
    candidates: tuple[ResumableTask, ...] | None = None


@dataclass(frozen=True)
class PreferenceSource:
    """Where an effective preference comes from: a scope, and the stored memory when there is one."""

    source: str
    memory_id: str | None = None
    version: int | None = None


@dataclass(frozen=True)
class RequestConstraint:
    """A constraint of this request only ("this time plain text"): it never changes a stored preference."""

    key: str
    value: str


@dataclass(frozen=True)
class Conflict:
    """Two claims for one key and scope that no rule decides between: neither is used."""

    key: str
    scope: str | None
    status: str
    candidates: tuple[JsonObject, ...]


@dataclass(frozen=True)
class BundleItem:
    """One injected memory with its provenance and why it ranked where it did."""

    memory_id: str
    version: int
    category: str
    status: str
    space: str
    key: str | None
    content: str
    abstract: str
    applicability: str
    source_refs: tuple[str, ...]
    source_level: str
    observed_at: str | None
    revision: int
    score: float
    score_breakdown: Mapping[str, float | None]
    matched_by: tuple[str, ...]

    @classmethod
    def of(cls, s: Scored) -> BundleItem:
        m, b = s.memory, s.breakdown
        scope = f"project {m.project_id}" if m.project_id else (f"session {m.session_id}" if m.session_id
                                                                 else "global")
        purposes = f"; purposes {', '.join(m.allowed_purposes)}" if m.allowed_purposes else ""
        return cls(
            memory_id=str(m.memory_id), version=m.version, category=m.category, status=m.status, space=m.space,
            key=m.key, content=m.content, abstract=m.abstract,
            applicability=f"{m.space.lower()} memory, {scope}{purposes}",
            source_refs=(m.source_id, *m.evidence_refs), source_level=m.source_level,
            observed_at=m.observed_at.isoformat() if m.observed_at else None, revision=m.revision,
            score=round(b.total, 6), score_breakdown=b.as_dict(), matched_by=tuple(sorted(s.sources)),
        )


@dataclass(frozen=True)
class NotApplicable:
    """A ranked memory left out as not worth injecting, and why (see ``NotApplicableOut``)."""

    memory_id: str
    version: int
    reason: str


@dataclass(frozen=True)
class ExplainedCandidate:
    rank: int
    memory_id: str
    version: int
    matched_by: tuple[str, ...]
    breakdown: Mapping[str, float | None]


@dataclass(frozen=True)
class Explain:
    """Every ranked candidate and how many memories each hard filter hid (only when asked for)."""

    candidates: tuple[ExplainedCandidate, ...]
    filtered_by_reason: Mapping[str, int]


@dataclass(frozen=True)
class Bundle:
    """The memory bundle: published knowledge (reviewed facts) and items (the memories the caller may use, the
    tenant's and system's included), with how they were chosen."""

    trace_id: str
    plan: RecallPlan
    request_constraints: tuple[RequestConstraint, ...]
    effective_preferences: Mapping[str, str]
    preference_sources: Mapping[str, PreferenceSource]
    task_state: TaskState | None
    knowledge: tuple[KnowledgeEntry, ...]
    items: tuple[BundleItem, ...]
    conflict_decisions: tuple[JsonObject, ...]
    conflicts: tuple[Conflict, ...]
    warnings: tuple[str, ...]
    version_vector: Mapping[str, int]
    snapshot_revision: int
    truncated_by_budget: bool
    not_applicable: tuple[NotApplicable, ...]
    candidates_considered: int
    dropped_on_reread: int
    explain: Explain | None = None
    task_candidates: tuple[ResumableTask, ...] = ()
    """The caller's resumable tasks, when a RESUME_TASK recall named none."""
    skills: SkillSection = NO_SKILLS
    """OPERATE: the skills the request is about, in their own quota (never memories)."""

    @property
    def needs_task_choice(self) -> bool:
        """Several tasks could be resumed and none was chosen: the agent must ask the user which one."""
        return self.task_state is None and len(self.task_candidates) > 1

    def is_empty(self) -> bool:
        """Nothing to put in a prompt (preferences alone are defaults, not news)."""
        return not (self.items or self.knowledge or self.request_constraints or self.task_state
                    or self.task_candidates or self.warnings or self.conflicts or self.skills.skills)
