"""The recall pipeline, stage by stage, ending in a memory bundle (seed 003 §12, seed 001 §6.4).

scope → hard filters → candidates (capped per source) → authoritative re-read →
score → stable rank → stale/conflicts → de-dup by source → budget → bundle. Published knowledge is its own
source (:mod:`memory.knowledge.recall`), with its own hard filters and quota.
Every stage is a function of its own module; this one only wires them and assembles the :class:`Bundle`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import literal
from sqlalchemy.orm import Session

from memory.embedders.engine import EmbeddingUnavailable
from memory.identity.auth import PrincipalContext
from memory.knowledge.recall import KnowledgeQuery, KnowledgeRecalled, recall_knowledge
from memory.recall import candidates as cand
from memory.recall.bundle_types import (
    Bundle,
    BundleItem,
    Explain,
    ExplainedCandidate,
    NotApplicable,
    RequestConstraint,
    TaskState,
)
from memory.recall.filters import filtered_by_reason
from memory.recall.gather import Gathered, gather
from memory.recall.plan import SourceType
from memory.recall.preferences import Preferences, effective_preferences, stored_preferences
from memory.recall.ranking import stable_rank
from memory.recall.request import RecallRequest
from memory.recall.rerank import rerank
from memory.recall.reread import snapshot_revision
from memory.recall.scoring import Scored, score_pool
from memory.recall.selection import Packed, Settled, applicable, pack, settle
from memory.recall.skills import NO_SKILLS, SkillSection, skill_section
from memory.recall.stages import Stage, StageClock

WAITING_FOR_APPROVAL = "the task is waiting for approval: do not publish or act on its draft yet"
SEVERAL_TASKS = ("several tasks can be resumed (task_candidates): ask the user which one they mean and resume "
                 "it by its task_id; do not guess")
NO_TASK = "no resumable task found for this user: none is running or waiting; say so rather than invent progress"


@dataclass(frozen=True)
class Outcome:
    """The bundle, and what its audit event and usage counters need besides."""

    bundle: Bundle
    filtered: Mapping[str, int]
    selected: list[Scored]


@dataclass(frozen=True)
class Recalled:
    """What the memory source contributed to a bundle (nothing when the plan reads no memory)."""

    packed: Packed = field(default_factory=Packed)
    settled: Settled = field(default_factory=Settled)
    not_applicable: list[NotApplicable] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    considered: int = 0
    dropped: int = 0
    explain: Explain | None = None


def preferences_for(
    session: Session, principal: PrincipalContext, request: RecallRequest, now: datetime,
) -> Preferences:
    """The effective preferences: the stored ones when the plan reads the profile, then this request's."""
    spec = request.plan.reads(SourceType.USER_PROFILE)
    stored = stored_preferences(session, principal, request.filters, now, spec.limit) if spec is not None else []
    return effective_preferences(stored, request.request_constraints)


def rank(request: RecallRequest, gathered: Gathered, now: datetime) -> tuple[list[Scored], list[str]]:
    """Scores, the stable rank and the rerank stage (a failed rerank is a warning; the fused order stands)."""
    return rerank(request.reranker, request.query, stable_rank(score_pool(gathered.pool, gathered.terms, now)))


def explain_ranked(
    session: Session, principal: PrincipalContext, request: RecallRequest, terms: list[str], ranked: list[Scored],
    now: datetime,
) -> Explain:
    """Every ranked candidate with its breakdown, and how many matching memories each hard filter hid."""
    filtered = filtered_by_reason(session, principal, request.filters, cand.lexical_match(request.query, terms),
                                  literal(now))
    return Explain(
        tuple(ExplainedCandidate(n + 1, str(s.memory.memory_id), s.memory.version, tuple(sorted(s.sources)),
                                 s.breakdown.as_dict()) for n, s in enumerate(ranked)),
        filtered,
    )


def recall_memories(
    session: Session, principal: PrincipalContext, request: RecallRequest, prefs: Preferences, now: datetime,
    clock: StageClock,
) -> Recalled:
    """The memory source's part: candidates, rank, relevance cut, staleness and conflicts, then the budget."""
    gathered = gather(session, principal, request, now)
    clock.end(Stage.CANDIDATES)
    ranked, rerank_warnings = rank(request, gathered, now)
    explained = explain_ranked(session, principal, request, gathered.terms, ranked, now) if request.explain else None
    relevant, not_applicable = applicable(ranked, request, prefs)
    settled = settle(relevant, request.task_state)
    clock.end(Stage.RANKING)
    return Recalled(pack(settled.kept, request.plan), settled, not_applicable,
                    [*gathered.warnings, *rerank_warnings], gathered.considered, gathered.dropped, explained)


def knowledge_query(request: RecallRequest) -> KnowledgeQuery:
    """What the knowledge source reads of the request. The query vector is the memory source's (same model); if
    it failed, the memory source already said so and knowledge is found by its words alone."""
    vector = None
    if request.retrieval != "lexical" and request.model is not None:
        try:
            embedding = request.vector()
        except EmbeddingUnavailable:
            embedding = None
        vector = cand.vector_text(embedding) if embedding is not None else None
    spec = request.plan.reads(SourceType.KNOWLEDGE)
    return KnowledgeQuery(
        query=request.query, terms=cand.search_terms(request.query) if request.retrieval != "semantic" else [],
        keys=request.keys, project_id=request.filters.project_id, query_vector=vector, model=request.model,
        candidate_limit=request.plan.candidate_limit, inject_limit=spec.limit if spec is not None else 0,
        token_budget=request.plan.knowledge_token_budget, min_relevance=request.min_relevance,
    )


def version_vector(injected: list[Scored], prefs: Preferences, task: TaskState | None,
                   knowledge: KnowledgeRecalled) -> dict[str, int]:
    """The version of everything the bundle used: a later write to any of them makes the bundle stale.
    ``knowledge_version`` changes on any publish, supersede or withdrawal in the request's scope."""
    vector = {f"memory:{s.memory.memory_id}": s.memory.version for s in injected}
    vector |= {f"preference:{m.memory_id}": m.version for m in prefs.used}
    vector |= {f"knowledge:{k.knowledge_id}": k.version for k in knowledge.entries}
    if knowledge.knowledge_version is not None:
        vector["knowledge_version"] = knowledge.knowledge_version
    if task is not None:
        vector["task_state_version"] = task.state_version
    return vector


def task_warnings(request: RecallRequest) -> list[str]:
    """What the agent must know about the task before it answers: a wait it must not act past, or that it has to
    ask which task (or that there is none)."""
    task, candidates = request.task_state, request.task_candidates
    if task is not None:
        return [WAITING_FOR_APPROVAL] if task.status == "WAITING_FOR_APPROVAL" else []
    if candidates is None:
        return []
    return [SEVERAL_TASKS] if candidates else [NO_TASK]


def assemble(request: RecallRequest, revision: int, prefs: Preferences, memories: Recalled,
             knowledge: KnowledgeRecalled, skills: SkillSection = NO_SKILLS) -> Bundle:
    """The bundle of the stages' answers, in the order a reader meets them."""
    packed, settled, task = memories.packed, memories.settled, request.task_state
    waiting = task_warnings(request)
    explain = (memories.explain or Explain((), {})) if request.explain else None
    return Bundle(
        trace_id=request.trace_id, plan=request.plan,
        request_constraints=tuple(RequestConstraint(k, v) for k, v in sorted(request.request_constraints.items())),
        effective_preferences=prefs.effective, preference_sources=prefs.sources, task_state=task,
        knowledge=knowledge.entries, items=tuple(BundleItem.of(s) for s in packed.selected),
        conflict_decisions=(*prefs.decisions, *settled.decisions), conflicts=(*prefs.conflicts, *settled.conflicts),
        warnings=(*waiting, *knowledge.warnings, *memories.warnings, *settled.warnings),
        version_vector={**version_vector(packed.selected, prefs, task, knowledge), **skills.versions()},
        snapshot_revision=revision,
        truncated_by_budget=packed.truncated or knowledge.truncated, not_applicable=tuple(memories.not_applicable),
        candidates_considered=memories.considered, dropped_on_reread=memories.dropped, explain=explain,
        task_candidates=request.task_candidates or (), skills=skills,
    )


def build_bundle(
    session: Session, principal: PrincipalContext, request: RecallRequest, now: datetime,
    clock: StageClock | None = None,
) -> Outcome:
    """The memory bundle of ``request``: every stage, timed by ``clock``, inside the caller's transaction."""
    clock = clock or StageClock()
    revision = snapshot_revision(session)
    prefs = preferences_for(session, principal, request, now)
    clock.end(Stage.PLAN)
    memories = (recall_memories(session, principal, request, prefs, now, clock)
                if request.plan.reads(SourceType.MEMORY) else Recalled())
    knowledge = (recall_knowledge(session, principal.tenant_id, knowledge_query(request), now)
                 if request.plan.reads(SourceType.KNOWLEDGE) else KnowledgeRecalled())
    bundle = assemble(request, revision, prefs, memories, knowledge,
                      skill_section(session, principal, request.query, request.plan))
    clock.end(Stage.ASSEMBLE)
    filtered = memories.explain.filtered_by_reason if memories.explain is not None else {}
    return Outcome(bundle, filtered, memories.packed.selected)
