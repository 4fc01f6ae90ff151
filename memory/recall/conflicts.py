"""Conflicts (seed 003 §11): one fixed precedence ladder per key and scope, time as a tie-breaker, no guessing.

Memories conflict only when they state the same key in the same scope with
different values. The higher tier wins; in the same tier an explicit time
(effective_from, else observed_at) decides, newer first. When nothing decides,
both are returned as a conflict with their sources and neither is used.
A summary written from an older task state than the live one is stale.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum

from memory.enums import SourceLevel, Space, Status
from memory.models import Memory
from memory.recall.bundle_types import Conflict, JsonObject
from memory.recall.scoring import Scored
from memory.text import normalize


class Tier(IntEnum):
    """Lower wins. The same ladder for preferences and facts; it only applies within one key and scope."""

    SYSTEM_RULE = 0
    CURRENT_REQUEST = 1
    TASK_STATE = 2
    SESSION_CONFIRMED = 3
    USER_PROFILE = 4
    KNOWLEDGE = 5
    SUMMARY = 6
    INFERENCE = 7


SUMMARY_SOURCE_TYPES = frozenset({"SUMMARY", "SESSION_SUMMARY", "TASK_SUMMARY"})


def tier_of(memory: Memory) -> Tier:
    if memory.source_level == SourceLevel.E4.value or memory.status == Status.CANDIDATE.value:
        return Tier.INFERENCE
    if memory.source_type.upper() in SUMMARY_SOURCE_TYPES:
        return Tier.SUMMARY
    if memory.space == Space.SYSTEM.value:
        return Tier.SYSTEM_RULE
    if memory.space == Space.SESSION.value:
        return Tier.SESSION_CONFIRMED
    if memory.space == Space.TENANT.value:
        return Tier.KNOWLEDGE
    return Tier.USER_PROFILE


def _explicit_time(memory: Memory) -> datetime | None:
    return memory.effective_from or memory.observed_at


def _ref(memory: Memory) -> JsonObject:
    return {
        "memory_id": str(memory.memory_id), "version": memory.version, "tier": tier_of(memory).name,
        "content": memory.content, "source_refs": [memory.source_id, *memory.evidence_refs],
        "observed_at": memory.observed_at.isoformat() if memory.observed_at else None,
        "effective_from": memory.effective_from.isoformat() if memory.effective_from else None,
    }


@dataclass
class Resolution:
    kept: list[Scored]
    decisions: list[JsonObject] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _same_value(a: Memory, b: Memory) -> bool:
    return " ".join(normalize(a.content).split()) == " ".join(normalize(b.content).split())


def decide(a: Memory, b: Memory) -> tuple[Memory, Memory, str] | None:
    """(winner, loser, reason) by the ladder, then explicit time; ``None`` when no rule decides."""
    ta, tb = tier_of(a), tier_of(b)
    if ta != tb:
        return (a, b, "PRECEDENCE") if ta < tb else (b, a, "PRECEDENCE")
    time_a, time_b = _explicit_time(a), _explicit_time(b)
    if time_a is not None and time_b is not None and time_a != time_b:
        return (a, b, "NEWER_FACT") if time_a > time_b else (b, a, "NEWER_FACT")
    return None


def resolve(ranked: Sequence[Scored]) -> Resolution:
    """Walk in rank order; per (key, project scope) keep one value, record every decision or open conflict."""
    groups: dict[tuple[str, str | None], list[Scored]] = {}
    for item in ranked:
        if item.memory.key:
            groups.setdefault((item.memory.key, item.memory.project_id), []).append(item)
    dropped: set[tuple[str, int]] = set()
    resolution = Resolution(kept=[])
    for (key, scope), members in groups.items():
        winner = members[0]
        for other in members[1:]:
            if _same_value(winner.memory, other.memory):
                dropped.add((str(other.memory.memory_id), other.memory.version))
                resolution.decisions.append({
                    "key": key, "scope": scope, "reason": "DUPLICATE", "winner": _short(winner.memory),
                    "suppressed": _short(other.memory), "persistent_change": False,
                })
                continue
            outcome = decide(winner.memory, other.memory)
            if outcome is None:
                for m in (winner.memory, other.memory):
                    dropped.add((str(m.memory_id), m.version))
                claims = (_ref(winner.memory), _ref(other.memory))
                resolution.conflicts.append(Conflict(key, scope, "UNRESOLVED", claims))
                resolution.warnings.append(
                    f"conflicting memories for {key!r} and no rule decides between them: "
                    "verify before relying on either"
                )
                continue
            win, lose, reason = outcome
            if win is other.memory:
                dropped.add((str(winner.memory.memory_id), winner.memory.version))
                winner = other
            else:
                dropped.add((str(lose.memory_id), lose.version))
            resolution.decisions.append({
                "key": key, "scope": scope, "reason": reason, "winner": _short(win), "suppressed": _short(lose),
                "persistent_change": False,
            })
    resolution.kept = [s for s in ranked if (str(s.memory.memory_id), s.memory.version) not in dropped]
    return resolution


def _short(memory: Memory) -> JsonObject:
    return {"memory_id": str(memory.memory_id), "version": memory.version, "tier": tier_of(memory).name}


_TASK_REF = re.compile(r"^task:(?P<task>[^@]+)@(?P<version>\d+)$")


def stale_against_task(ranked: Sequence[Scored], task_id: str, state_version: int, status: str) -> Resolution:
    """A memory built from task ``task_id`` at an older state_version than the live one is stale: out, with a
    warning."""
    resolution = Resolution(kept=[])
    for item in ranked:
        versions = [
            int(m.group("version")) for ref in item.memory.evidence_refs
            if (m := _TASK_REF.match(ref)) and m.group("task") == task_id
        ]
        if versions and max(versions) < state_version:
            resolution.decisions.append({
                "key": f"task:{task_id}", "reason": "STALE_AGAINST_TASK_STATE", "winner": "TASK_STATE",
                "suppressed": _short(item.memory), "persistent_change": False,
                "summary_state_version": max(versions), "task_state_version": state_version,
            })
            resolution.warnings.append(
                f"memory {item.memory.memory_id} describes task {task_id} at state_version {max(versions)}; "
                f"the task is now {status} at state_version {state_version}: it is stale, use the task state"
            )
        else:
            resolution.kept.append(item)
    return resolution
