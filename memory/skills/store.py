"""Pushed skills (tables of migration 0031): each file once by its sha256, each push an immutable numbered version.

Pushing the tree of the latest version again is idempotent (that version, not a new one); any other tree, an
older one included (a rollback), is the next version. Row-level security keeps another tenant's skills out of
every query here: to the caller they do not exist.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import InvalidInput
from memory.models import AuditEntry
from memory.skills.format import SkillTree, parse_tree
from memory.skills.layers import Layer, SkillSpace
from memory.skills.models import SkillBlob, SkillVersion
from memory.skills.system import system_skills


@dataclass(frozen=True)
class Pushed:
    row: SkillVersion
    created: bool


def _latest_row(session: Session, tenant_id: str, space: SkillSpace, agent_id: str, name: str) -> SkillVersion | None:
    return session.scalars(
        select(SkillVersion).where(SkillVersion.tenant_id == tenant_id, SkillVersion.space == space.value,
                                   SkillVersion.agent_id == agent_id, SkillVersion.name == name)
        .order_by(SkillVersion.version.desc()).limit(1)
    ).one_or_none()


def _check_base(session: Session, tenant_id: str, space: SkillSpace, tree: SkillTree) -> None:
    """An overlay needs a skill under it; a skill that is the base of its name must say what it is for."""
    has_system = tree.name in system_skills()
    has_tenant = _latest_row(session, tenant_id, SkillSpace.TENANT, "", tree.name) is not None
    if space is SkillSpace.AGENT and not (has_system or has_tenant):
        raise InvalidInput(f"no SYSTEM or TENANT skill {tree.name!r} exists for this agent overlay to change; "
                           "push the tenant's skill first (mnemo skills push DIR --space tenant)",
                           code="skill_base_missing", details={"file": "SKILL.md", "field": "name"})
    if space is SkillSpace.TENANT and not has_system and "description" not in tree.fields:
        raise InvalidInput(f"{tree.name!r} is a new skill, not an overlay of a SYSTEM one: its front matter needs "
                           "'description'", code="missing_skill_field",
                           details={"file": "SKILL.md", "field": "description"})


def push(session: Session, tenant_id: str, space: SkillSpace, agent_id: str, tree: SkillTree,
         pushed_by: str) -> Pushed:
    """Store ``tree`` as the next version of its skill in ``space`` (the latest one again: that version)."""
    # One push of a name at a time: the version number is read, then written.
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                    {"key": f"skill:{tenant_id}:{space.value}:{agent_id}:{tree.name}"})
    _check_base(session, tenant_id, space, tree)
    latest = _latest_row(session, tenant_id, space, agent_id, tree.name)
    if latest is not None and latest.tree_sha256 == tree.tree_sha256:
        return Pushed(latest, created=False)
    manifest = tree.manifest
    session.execute(insert(SkillBlob).values([
        {"tenant_id": tenant_id, "sha256": manifest[path], "content": content} for path, content in tree.files.items()
    ]).on_conflict_do_nothing())
    row = SkillVersion(tenant_id=tenant_id, space=space.value, agent_id=agent_id, name=tree.name,
                       version=1 if latest is None else latest.version + 1, manifest=manifest,
                       tree_sha256=tree.tree_sha256, declared_version=tree.declared_version, pushed_by=pushed_by)
    session.add(row)
    session.add(AuditEntry(tenant_id=tenant_id, actor=pushed_by, action="SKILL_PUSHED",
                           detail={"name": tree.name, "space": space.value, "agent_id": agent_id,
                                   "version": row.version, "tree_sha256": tree.tree_sha256}))
    session.flush()
    session.refresh(row)
    return Pushed(row, created=True)


def _trees(session: Session, tenant_id: str, rows: list[SkillVersion]) -> list[SkillTree]:
    """The directories of ``rows``, read back from their blobs (each passed :func:`parse_tree` when pushed)."""
    wanted = {sha for row in rows for sha in row.manifest.values()}
    query = select(SkillBlob.sha256, SkillBlob.content).where(SkillBlob.tenant_id == tenant_id,
                                                              SkillBlob.sha256.in_(wanted))
    blobs = {sha: content for sha, content in session.execute(query)} if wanted else {}
    return [parse_tree({path: blobs[sha] for path, sha in row.manifest.items()}) for row in rows]


def stored_layers(session: Session, tenant_id: str, agent_id: str | None,
                  name: str | None = None) -> dict[str, list[Layer]]:
    """The latest TENANT version of each skill and the latest overlay of ``agent_id`` (none without an agent), by
    name, TENANT first."""
    latest = (
        select(SkillVersion.space, SkillVersion.agent_id, SkillVersion.name,
               func.max(SkillVersion.version).label("version"))
        .where(SkillVersion.tenant_id == tenant_id,
               (SkillVersion.space == SkillSpace.TENANT.value)
               | ((SkillVersion.space == SkillSpace.AGENT.value) & (SkillVersion.agent_id == (agent_id or ""))))
        .group_by(SkillVersion.space, SkillVersion.agent_id, SkillVersion.name)
    )
    if name is not None:
        latest = latest.where(SkillVersion.name == name)
    keys = latest.subquery()
    rows = list(session.scalars(
        select(SkillVersion).join(keys, (SkillVersion.space == keys.c.space)
                                  & (SkillVersion.agent_id == keys.c.agent_id) & (SkillVersion.name == keys.c.name)
                                  & (SkillVersion.version == keys.c.version))
        .where(SkillVersion.tenant_id == tenant_id)
        .order_by(SkillVersion.name, SkillVersion.space.desc())  # 'TENANT' > 'AGENT': the tenant's first
    ))
    layers: dict[str, list[Layer]] = defaultdict(list)
    for row, tree in zip(rows, _trees(session, tenant_id, rows), strict=True):
        layers[row.name].append(Layer(SkillSpace(row.space), row.agent_id, row.version, tree))
    return dict(layers)


def versions(session: Session, tenant_id: str, name: str) -> list[SkillVersion]:
    """Every stored version of ``name`` in every space of the tenant, by space, agent and version."""
    return list(session.scalars(
        select(SkillVersion).where(SkillVersion.tenant_id == tenant_id, SkillVersion.name == name)
        .order_by(SkillVersion.space.desc(), SkillVersion.agent_id, SkillVersion.version)
    ))

