"""Request and response bodies of ``/skills``: a pushed directory in, resolved skills with provenance out."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from api.schemas.common import StrictRequest
from memory.skills.format import MAX_FILE_BYTES, MAX_FILES
from memory.skills.layers import Layer, LayerRef
from memory.skills.models import SkillVersion
from memory.skills.resolve import ResolvedSkill, Won

SpaceName = Literal["SYSTEM", "TENANT", "AGENT"]


class SkillPushIn(StrictRequest):
    """A skill directory: ``SKILL.md`` and any extra files, by path relative to the directory."""

    space: Literal["TENANT", "AGENT"] = Field(description=(
        "TENANT: the tenant's skill (admin). AGENT: an overlay for the agent of the key, or, for an admin, the "
        "agent named by the `agent` query parameter"))
    files: dict[Annotated[str, Field(min_length=1, max_length=300)],
                Annotated[str, Field(max_length=MAX_FILE_BYTES)]] = Field(
        min_length=1, max_length=MAX_FILES, description="Relative path → text, e.g. {\"SKILL.md\": \"---\\nname: "
                                                        "monthly-report\\nversion: '1.1'\\n---\\n## Role\\n...\"}")


class SkillVersionOut(BaseModel):
    name: str
    space: Literal["TENANT", "AGENT"]
    agent_id: str | None
    version: int = Field(description="1, 2, ... per skill, space and agent")
    declared_version: str = Field(description="The front matter's version")
    tree_sha256: str
    manifest: dict[str, str] = Field(description="Relative path → sha256 of the file's UTF-8 bytes")
    pushed_by: str
    pushed_at: str

    @classmethod
    def row(cls, row: SkillVersion) -> SkillVersionOut:
        return cls(name=row.name, space=row.space, agent_id=row.agent_id or None,  # type: ignore[arg-type]
                   version=row.version, declared_version=row.declared_version, tree_sha256=row.tree_sha256,
                   manifest=row.manifest, pushed_by=row.pushed_by, pushed_at=row.pushed_at.isoformat())


class SkillPushOut(SkillVersionOut):
    replayed: bool = Field(description="The latest version already held this very tree: nothing was written")


class ProvenanceOut(BaseModel):
    """The layer a field comes from."""

    space: SpaceName
    agent_id: str | None
    version: int | None = Field(description="The stored version; null for a SYSTEM skill (shipped with mnemo)")
    declared_version: str
    tree_sha256: str

    @classmethod
    def of(cls, layer: Layer) -> ProvenanceOut:
        return cls.model_validate(asdict(LayerRef.of(layer)))


class ResolvedFieldOut(BaseModel):
    value: str | list[str]
    provenance: ProvenanceOut


def _value(won: Won) -> str | list[str]:
    return won.value if isinstance(won.value, str) else list(won.value)


class SkillSummaryOut(BaseModel):
    name: str
    description: str | None
    layers: list[ProvenanceOut] = Field(description="The layers resolved, lowest first (SYSTEM, TENANT, AGENT)")
    winners: dict[str, SpaceName] = Field(description="Each field set, and the space whose value won it")

    @classmethod
    def of(cls, skill: ResolvedSkill) -> SkillSummaryOut:
        description = skill.fields.get("description")
        return cls(name=skill.name, description=description.value if description else None,  # type: ignore[arg-type]
                   layers=[ProvenanceOut.of(layer) for layer in skill.layers],
                   winners={field: won.layer.space.value for field, won in skill.fields.items()})


class SkillsOut(BaseModel):
    items: list[SkillSummaryOut]


class SkillOut(BaseModel):
    """A skill as the caller's requests resolve it now, each field with the layer it came from."""

    name: str
    layers: list[ProvenanceOut]
    fields: dict[str, ResolvedFieldOut] = Field(description=(
        "description, role, strategy, constraints, tools, prompt_template, examples: those some layer sets"))
    files: dict[str, ResolvedFieldOut] = Field(description="Extra files (not SKILL.md) by path, verbatim")

    @classmethod
    def of(cls, skill: ResolvedSkill) -> SkillOut:
        def out(won: Won) -> ResolvedFieldOut:
            return ResolvedFieldOut(value=_value(won), provenance=ProvenanceOut.of(won.layer))

        return cls(name=skill.name, layers=[ProvenanceOut.of(layer) for layer in skill.layers],
                   fields={field: out(won) for field, won in skill.fields.items()},
                   files={path: out(won) for path, won in skill.files.items()})


class SkillVersionsOut(BaseModel):
    name: str
    system: ProvenanceOut | None = Field(description="The SYSTEM skill of this name shipped with mnemo, if any")
    items: list[SkillVersionOut] = Field(description="Every stored version: TENANT, then each agent's overlays")
