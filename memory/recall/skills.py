"""The bundle's ``skills`` section of an OPERATE recall (seed 004 §9.1: operational = skill + resource + memory).

The caller's skills are resolved now (:mod:`memory.skills.resolve`: SYSTEM → TENANT → the key's agent overlay),
the ones the request is about are chosen (named in it, or sharing informative words with a skill's name and
description), and their fields are packed in the plan's own skills quota, field by field in prompt order, so
skills never eat the memories' budget nor memories the skills'. Skills are procedures: they enter neither
``items`` nor ``knowledge``, and nothing here writes a memory (seed 004 P10). Each skill carries how it went:
its runs by outcome, from the agent's SKILL_EXECUTION memories of the skill as it resolves now.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from memory.identity.auth import PrincipalContext
from memory.recall.plan import RecallPlan, SourceType
from memory.skills.executions import outcomes
from memory.skills.format import FieldValue
from memory.skills.layers import LayerRef
from memory.skills.resolve import ResolvedSkill, resolved_skills
from memory.text import STOP_LEXEMES, lexemes, normalize, search_terms
from memory.tokens import count_tokens

NAMED = 10
"""What naming a skill ("run monthly-report") weighs against each shared word."""


@dataclass(frozen=True)
class SkillField:
    name: str
    value: FieldValue
    source: LayerRef
    """The layer whose value won the field."""


@dataclass(frozen=True)
class BundleSkill:
    name: str
    layers: tuple[LayerRef, ...]
    fields: tuple[SkillField, ...]
    omitted: tuple[str, ...]
    """Fields the skills quota had no room for (GET /skills/{name} has them)."""
    outcomes: dict[str, int]
    """Runs of these very layers by outcome (succeeded, failed, partial), as the caller's agent reported them."""


@dataclass(frozen=True)
class SkillSection:
    skills: tuple[BundleSkill, ...] = ()
    truncated: bool = False

    def versions(self) -> dict[str, int]:
        """The stored layers used, for the bundle's version vector (a SYSTEM layer changes only with mnemo)."""
        return {f"skill:{s.name}:{layer.space}{':' + layer.agent_id if layer.agent_id else ''}": layer.version
                for s in self.skills for layer in s.layers if layer.version is not None}


NO_SKILLS = SkillSection()
"""The section of a plan that reads no skills."""


def _text(value: FieldValue) -> str:
    return value if isinstance(value, str) else "\n".join(value)


def relevance(query: str, skill: ResolvedSkill) -> int:
    """Shared informative words of the query and the skill's name and description, and more for naming it."""
    said = " ".join(normalize(query).split())
    named = skill.name in said or skill.name.replace("-", " ") in said
    description = skill.fields.get("description")
    words = set(lexemes(f"{skill.name.replace('-', ' ')} {_text(description.value) if description else ''}"))
    return NAMED * named + len((set(search_terms(query)) - STOP_LEXEMES) & words)


def _packed(skill: ResolvedSkill, ran: dict[str, int], room: int) -> tuple[BundleSkill | None, int]:
    """The skill's fields that fit in ``room`` tokens, in prompt order, and the tokens they take."""
    used, kept, omitted = count_tokens(f"{skill.name} {ran}"), [], []
    for name, won in skill.fields.items():
        cost = count_tokens(_text(won.value))
        if used + cost <= room:
            kept.append(SkillField(name, won.value, LayerRef.of(won.layer)))
            used += cost
        else:
            omitted.append(name)
    if not kept:
        return None, 0
    layers = tuple(LayerRef.of(layer) for layer in skill.layers)
    return BundleSkill(skill.name, layers, tuple(kept), tuple(omitted), ran), used


def skill_section(session: Session, principal: PrincipalContext, query: str, plan: RecallPlan) -> SkillSection:
    """The skills an OPERATE request is about, within ``plan.skill_budget``; nothing when the plan reads none."""
    spec = plan.reads(SourceType.SKILLS)
    if spec is None:
        return NO_SKILLS
    scored = [(relevance(query, skill), skill) for skill in
              resolved_skills(session, principal.tenant_id, principal.agent_id)]
    chosen = sorted(((score, skill) for score, skill in scored if score > 0), key=lambda p: (-p[0], p[1].name))
    room, bundled, truncated = plan.skill_budget, [], False
    for _, skill in chosen[: spec.limit]:
        packed, used = _packed(skill, outcomes(session, principal, skill), room)
        truncated |= packed is None or bool(packed.omitted)
        if packed is not None:
            bundled.append(packed)
            room -= used
    return SkillSection(tuple(bundled), truncated)
