"""A skill execution report (issue 27 item 5): an agent says, in its session, that it ran a skill and how it went.

The report is checked when it is posted, against the skills the caller resolves now: the skill must be the
caller's (another tenant's is as unknown as a missing one), the version it names must be one a layer of that
resolution declares, and the layers it resolved to (space, agent, stored version, tree sha256) are recorded by
mnemo beside it, never taken from the client. A report holds references and an outcome, never the skill's text
(seed 004 P10): the commit turns it into a SKILL_EXECUTION memory of the agent
(:func:`memory.sessions.extraction.rules.skill_executions`).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memory.enums import Category, Status
from memory.errors import InvalidInput, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import Memory
from memory.skills.layers import LayerRef
from memory.skills.resolve import ResolvedSkill, resolved_skill
from memory.store.visibility import not_tombstoned, visible_to

MAX_NOTE_CHARS = 500
MAX_VERSION_CHARS = 64


class Outcome(StrEnum):
    """How a run ended, in the agent's words; part of what makes two runs the same (a failure never counts as a
    success)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PARTIAL = "partial"


@dataclass(frozen=True)
class SkillExecution:
    """What an agent reported, and, once :func:`verified`, the layers the skill resolved to when it was posted."""

    skill: str
    version: str
    """The declared version (front matter) the agent ran: one of its resolution's layers declares it."""
    outcome: Outcome
    note: str
    layers: tuple[LayerRef, ...] = ()
    """Lowest first; empty until verified (a report read back without layers yields no memory)."""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "outcome": self.outcome.value, "layers": [asdict(layer) for layer in self.layers]}

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> SkillExecution:
        return cls(data["skill"], data["version"], Outcome(data["outcome"]), data["note"],
                   tuple(LayerRef(**layer) for layer in data.get("layers") or ()))

    @property
    def key(self) -> str:
        return execution_key(self.skill, self.outcome, self.layers)


def execution_key(skill: str, outcome: Outcome, layers: tuple[LayerRef, ...]) -> str:
    """What makes two executions the same one again: the skill, the trees it resolved to, the outcome."""
    trees = hashlib.sha256(":".join(layer.tree_sha256 for layer in layers).encode()).hexdigest()[:16]
    return f"skill.{skill}.{outcome.value}.{trees}"


def outcomes(session: Session, principal: PrincipalContext, skill: ResolvedSkill) -> dict[str, int]:
    """How the skill, as it resolves now (the same trees), went for the caller's agent: runs by outcome, from the
    current SKILL_EXECUTION memories the caller may see."""
    layers = tuple(LayerRef.of(layer) for layer in skill.layers)
    keys = {execution_key(skill.name, outcome, layers): outcome.value for outcome in Outcome}
    counted: dict[str | None, int] = {key: total for key, total in session.execute(
        select(Memory.key, func.sum(Memory.occurrences))
        .where(visible_to(principal), not_tombstoned(), Memory.category == Category.SKILL_EXECUTION.value,
               Memory.status == Status.ACTIVE.value, Memory.key.in_(keys))
        .group_by(Memory.key)
    )}
    return {outcome: int(counted.get(key) or 0) for key, outcome in keys.items()}


def verified(session: Session, principal: PrincipalContext, report: SkillExecution, field: str) -> SkillExecution:
    """``report`` with the layers the caller's skill resolves to now; a 422 naming ``field`` when it cannot be."""
    if principal.agent_id is None:
        raise InvalidInput("a skill execution is an agent's: report it with a key bound to an agent "
                           "(create the key with --agent)", code="agent_required", details={"field": field})
    try:
        skill = resolved_skill(session, principal.tenant_id, principal.agent_id, report.skill)
    except NotFound:
        raise InvalidInput(f"no skill {report.skill!r} for this agent: GET /skills lists the skills it can run",
                           code="unknown_skill", details={"field": f"{field}.skill", "skill": report.skill}) from None
    declared = list(dict.fromkeys(layer.tree.declared_version for layer in skill.layers))
    if report.version not in declared:
        raise InvalidInput(f"skill {report.skill!r} resolves now to layers declaring {declared}, not "
                           f"{report.version!r}: report the version the agent ran (GET /skills/{report.skill})",
                           code="skill_version_mismatch",
                           details={"field": f"{field}.version", "declared_versions": declared})
    return replace(report, layers=tuple(LayerRef.of(layer) for layer in skill.layers))
