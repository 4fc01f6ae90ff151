"""Per-request resolution (seed 004 §5.4, §9.1 SkillResolver): SYSTEM → TENANT → the caller's AGENT overlay, field by
field, each field recording the layer it came from. Nothing is resolved ahead of a request, so a push is seen by
the next request and each caller sees its own agent's overlay (no global singleton).

An overlay changes a skill; it does not make one: layers of a name with no SYSTEM or TENANT skill under them are
left out (a push refuses such an overlay, so only a SYSTEM skill removed by an upgrade can leave one behind).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.orm import Session

from memory.errors import NotFound
from memory.skills.format import FIELDS, SKILL_FILE, FieldValue
from memory.skills.layers import Layer, SkillSpace
from memory.skills.store import stored_layers
from memory.skills.system import system_skills


@dataclass(frozen=True)
class Won:
    """A field's (or an extra file's) value and the layer it came from."""

    value: FieldValue
    layer: Layer


@dataclass(frozen=True)
class ResolvedSkill:
    name: str
    layers: tuple[Layer, ...]
    """Lowest first: SYSTEM, TENANT, AGENT, those that exist."""
    fields: Mapping[str, Won]
    """In :data:`~memory.skills.format.FIELDS` order, only those some layer sets."""
    files: Mapping[str, Won]
    """Extra files (not SKILL.md) by relative path: the highest layer holding a path wins it."""


def resolve(name: str, layers: list[Layer]) -> ResolvedSkill | None:
    """The skill ``layers`` make, lowest first; None when no SYSTEM or TENANT layer is the base."""
    if not layers or layers[0].space is SkillSpace.AGENT:
        return None
    fields: dict[str, Won] = {}
    files: dict[str, Won] = {}
    for layer in layers:
        fields |= {field: Won(value, layer) for field, value in layer.tree.fields.items()}
        files |= {path: Won(text, layer) for path, text in layer.tree.files.items() if path != SKILL_FILE}
    ordered = {field: fields[field] for field in FIELDS if field in fields}
    return ResolvedSkill(name, tuple(layers), ordered, dict(sorted(files.items())))


def resolved_skills(session: Session, tenant_id: str, agent_id: str | None,
                    name: str | None = None) -> list[ResolvedSkill]:
    """The caller's skills by name (only ``name``'s when given), resolved now."""
    shipped = {n: tree for n, tree in system_skills().items() if name is None or n == name}
    stored = stored_layers(session, tenant_id, agent_id, name)
    out = []
    for each in sorted(shipped.keys() | stored.keys()):
        base = [Layer(SkillSpace.SYSTEM, "", None, shipped[each])] if each in shipped else []
        skill = resolve(each, [*base, *stored.get(each, [])])
        if skill is not None:
            out.append(skill)
    return out


def resolved_skill(session: Session, tenant_id: str, agent_id: str | None, name: str) -> ResolvedSkill:
    """One skill, resolved now; a name the caller has no skill of (another tenant's included) is a 404."""
    found = resolved_skills(session, tenant_id, agent_id, name)
    if not found:
        raise NotFound(f"no skill {name!r}: GET /skills lists yours", code="skill_not_found", details={"name": name})
    return found[0]
