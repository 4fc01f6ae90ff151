"""From the ranked candidates to what is injected: the relevance cut, task staleness and conflicts, de-dup
by source, then the inject limit and the token budget.

Each stage is a function of plain values (no database), so each can be checked on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memory.recall.bundle_types import Conflict, JsonObject, NotApplicable, TaskState
from memory.recall.conflicts import resolve, stale_against_task
from memory.recall.plan import RecallPlan
from memory.recall.preferences import Preferences
from memory.recall.request import RecallRequest
from memory.recall.scoring import Scored
from memory.text import normalize
from memory.tokens import within_budget

NOT_APPLICABLE_SHOWN = 20
"""How many left-out memories a bundle lists (the rest are only counted out)."""


def not_applicable_reason(s: Scored, request: RecallRequest) -> str | None:
    """Why a ranked memory is not worth injecting, or None. An exact key match always is. Below the absolute
    ``min_relevance`` it is not; nor, in a hybrid recall with a floor, is a memory the words did not find whose
    vector is weaker than this recall's average candidate (a negative score): e5 puts unrelated short texts at
    a cosine of 0.78-0.83, as close as a true paraphrase, so only the comparison tells them apart.
    ``min_relevance`` 0 keeps every candidate (the benchmarks' setting)."""
    if "key" in s.sources:
        return None
    if s.breakdown.relevance < request.min_relevance:
        return "below_relevance_floor"
    if request.min_relevance > 0 and request.retrieval == "hybrid" and s.sources == {"vector"} \
            and s.breakdown.total < 0:
        return "vector_only_below_average"
    return None


def applicable(
    ranked: Sequence[Scored], request: RecallRequest, prefs: Preferences,
) -> tuple[list[Scored], list[NotApplicable]]:
    """The ranked memories worth injecting, in order, and the first of those left out (with why).

    A memory the effective preferences already carry (or this request overrides) is neither: it is
    represented there."""
    relevant: list[Scored] = []
    left_out: list[NotApplicable] = []
    for s in ranked:
        if s.memory.key in request.request_constraints or any(s.memory is u for u in prefs.used):
            continue
        reason = not_applicable_reason(s, request)
        if reason is None:
            relevant.append(s)
        else:
            left_out.append(NotApplicable(str(s.memory.memory_id), s.memory.version, reason))
    return relevant, left_out[:NOT_APPLICABLE_SHOWN]


@dataclass(frozen=True)
class Settled:
    """The memories left once staleness, conflicts and duplicates were decided, and every decision."""

    kept: list[Scored] = field(default_factory=list)
    decisions: list[JsonObject] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def settle(relevant: list[Scored], task: TaskState | None) -> Settled:
    """Stale against the live task, then the conflict ladder, then one copy per source statement."""
    decisions: list[JsonObject] = []
    warnings: list[str] = []
    if task is not None:
        stale = stale_against_task(relevant, task.task_id, task.state_version, task.status)
        relevant, decisions, warnings = stale.kept, stale.decisions, stale.warnings
    resolution = resolve(relevant)
    kept, duplicates = dedupe_by_source(resolution.kept)
    return Settled(kept, [*decisions, *resolution.decisions, *duplicates], resolution.conflicts,
                   [*warnings, *resolution.warnings])


def dedupe_by_source(ranked: list[Scored]) -> tuple[list[Scored], list[JsonObject]]:
    """The same statement from the same source once: the higher-ranked copy stays."""
    seen: set[tuple[str, str]] = set()
    kept: list[Scored] = []
    decisions: list[JsonObject] = []
    for item in ranked:
        key = (item.memory.source_id, " ".join(normalize(item.memory.content).split()))
        if key in seen:
            decisions.append({"key": item.memory.key, "reason": "DUPLICATE_OF_SOURCE", "winner": None,
                              "suppressed": {"memory_id": str(item.memory.memory_id), "version": item.memory.version},
                              "persistent_change": False})
            continue
        seen.add(key)
        kept.append(item)
    return kept, decisions


@dataclass(frozen=True)
class Packed:
    """What fits the inject limit and the token budget: memories of every space (tenant and system memories are
    memories, not knowledge: only reviewed, published knowledge is that, and it has its own source and quota)."""

    selected: list[Scored] = field(default_factory=list)
    truncated: bool = False
    """A memory did not fit the token budget (a smaller one after it may have)."""


def pack(kept: Sequence[Scored], plan: RecallPlan) -> Packed:
    """In rank order, up to the inject limit, each memory whose tokens still fit the budget."""
    return Packed(*within_budget(kept, plan.inject_limit, plan.token_budget, lambda s: s.memory.content))
