"""The layer a skill's text comes from: SYSTEM (shipped with mnemo), TENANT (an admin's push), AGENT (an overlay)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from memory.skills.format import SkillTree


class SkillSpace(StrEnum):
    """Resolution order, lowest first: a later space's field wins (seed 004 §5.4, §6.1)."""

    SYSTEM = "SYSTEM"
    TENANT = "TENANT"
    AGENT = "AGENT"


@dataclass(frozen=True)
class Layer:
    """One space's directory of a skill, with what identifies it: provenance of every field it wins."""

    space: SkillSpace
    agent_id: str
    """'' unless AGENT."""
    version: int | None
    """The stored version (1, 2, ...); None for a SYSTEM skill, which is versioned with mnemo."""
    tree: SkillTree


@dataclass(frozen=True)
class LayerRef:
    """A layer as a reader cites it (the provenance of a field): which space, agent and version, of which tree."""

    space: str
    agent_id: str | None
    version: int | None
    declared_version: str
    tree_sha256: str

    @classmethod
    def of(cls, layer: Layer) -> LayerRef:
        return cls(layer.space.value, layer.agent_id or None, layer.version, layer.tree.declared_version,
                   layer.tree.tree_sha256)
