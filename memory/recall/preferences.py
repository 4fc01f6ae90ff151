"""Effective preferences (seed 003 §6): product default → global → project → this request.

A request constraint ("this time plain text") wins for this request only: it is
reported as a decision with ``persistent_change: false`` and no stored version
changes. A model's inference (E4) never becomes an active preference: it is
never ACTIVE (see ``memory.store.memories``) and is skipped here again as a second wall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from memory.enums import Category, SourceLevel, Space
from memory.identity.auth import PrincipalContext
from memory.models import Memory
from memory.recall.bundle_types import Conflict, JsonObject, PreferenceSource
from memory.recall.conflicts import decide
from memory.store.visibility import NOW, QueryFilters, hard_filters

PRODUCT_DEFAULTS: Mapping[str, str] = {"response.output_format": "markdown"}
"""What applies when nobody said anything."""


@dataclass
class Preferences:
    effective: dict[str, str] = field(default_factory=dict)
    sources: dict[str, PreferenceSource] = field(default_factory=dict)
    decisions: list[JsonObject] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    used: list[Memory] = field(default_factory=list)


def stored_preferences(
    session: Session, principal: PrincipalContext, filters: QueryFilters, now: datetime, limit: int
) -> list[Memory]:
    """The caller's keyed PREFERENCE memories that pass every hard filter, by key then revision.

    Profile facts go through ranking and conflicts instead."""
    return list(session.execute(_preferences_statement(principal, filters, limit), {"now": now}).scalars())


@lru_cache(maxsize=256)
def _preferences_statement(principal: PrincipalContext, filters: QueryFilters, limit: int) -> Select:  # type: ignore[type-arg]
    """Built once per caller, filter set and limit; the instant is a parameter (:data:`memory.store.visibility.NOW`)."""
    return (
        select(Memory)
        .where(
            hard_filters(principal, filters, NOW),
            Memory.key.is_not(None),
            Memory.category == Category.PREFERENCE.value,
            Memory.space.in_([Space.USER.value, Space.SESSION.value]),
            Memory.source_level != SourceLevel.E4.value,
        )
        .order_by(Memory.key, Memory.revision.desc(), Memory.memory_id)
        .limit(limit)
    )


def _scope(memory: Memory) -> str:
    if memory.space == Space.SESSION.value:
        return "SESSION"
    return "PROJECT" if memory.project_id is not None else "GLOBAL"


SCOPE_ORDER = ("PRODUCT_DEFAULT", "GLOBAL", "PROJECT", "SESSION", "CURRENT_REQUEST")


def effective_preferences(stored: Sequence[Memory], request_constraints: Mapping[str, str]) -> Preferences:
    """Later scopes override earlier ones; within one scope the conflict ladder decides, or nothing is used."""
    prefs = Preferences()
    layers: dict[str, dict[str, tuple[str, PreferenceSource]]] = {
        "PRODUCT_DEFAULT": {k: (v, PreferenceSource("PRODUCT_DEFAULT")) for k, v in PRODUCT_DEFAULTS.items()}
    }
    by_scope_key: dict[tuple[str, str], list[Memory]] = {}
    for memory in stored:
        by_scope_key.setdefault((_scope(memory), memory.key or ""), []).append(memory)
    for (scope, key), members in sorted(by_scope_key.items()):
        chosen: Memory | None = members[0]
        for other in members[1:]:
            if chosen is None or other.content.strip() == chosen.content.strip():
                continue
            outcome = decide(chosen, other)
            if outcome is None:
                prefs.conflicts.append(Conflict(key, scope, "UNRESOLVED", tuple(
                    {"memory_id": str(m.memory_id), "version": m.version, "value": m.content.strip()}
                    for m in (chosen, other)
                )))
                chosen = None
                continue
            chosen = outcome[0]
        if chosen is not None:
            ref = PreferenceSource(scope, str(chosen.memory_id), chosen.version)
            layers.setdefault(scope, {})[key] = (chosen.content.strip(), ref)
            prefs.used.append(chosen)
    layers["CURRENT_REQUEST"] = {k: (v, PreferenceSource("CURRENT_REQUEST")) for k, v in request_constraints.items()}
    for scope in SCOPE_ORDER:
        for key, (value, ref) in sorted(layers.get(scope, {}).items()):
            previous = prefs.sources.get(key)
            if previous is not None and prefs.effective[key] != value:
                reason = "CURRENT_REQUEST_OVERRIDE" if scope == "CURRENT_REQUEST" else "SCOPE_OVERRIDE"
                prefs.decisions.append({
                    "key": key, "reason": reason,
                    "winner": scope, "suppressed": previous.source,
                    "suppressed_ref": None if previous.memory_id is None
                    else {"memory_id": previous.memory_id, "version": previous.version},
                    "persistent_change": False,
                })
            prefs.effective[key] = value
            prefs.sources[key] = ref
    return prefs
