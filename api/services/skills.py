"""Skills for ``/skills`` and the CLI: a push stored as the next version, and the caller's skills resolved now
(:mod:`memory.skills`: the format, the store, the resolution and who may push where)."""

from __future__ import annotations

from sqlalchemy import Engine

from api.schemas.skills import (
    ProvenanceOut,
    SkillOut,
    SkillPushIn,
    SkillPushOut,
    SkillsOut,
    SkillSummaryOut,
    SkillVersionOut,
    SkillVersionsOut,
)
from memory.db import tenant_session
from memory.errors import NotFound
from memory.identity.auth import PrincipalContext
from memory.skills import store
from memory.skills.access import push_target
from memory.skills.format import parse_tree
from memory.skills.layers import Layer, SkillSpace
from memory.skills.resolve import resolved_skill, resolved_skills
from memory.skills.system import system_skills


def push(engine: Engine, principal: PrincipalContext, body: SkillPushIn, agent: str | None) -> SkillPushOut:
    """Store the directory as the next version of its skill (``replayed``: the latest version is this tree)."""
    space = SkillSpace(body.space)
    agent_id = push_target(principal, space, agent)
    tree = parse_tree(body.files)
    with tenant_session(engine, principal.tenant_id) as session:
        pushed = store.push(session, principal.tenant_id, space, agent_id, tree, principal.user_id)
        return SkillPushOut(**SkillVersionOut.row(pushed.row).model_dump(), replayed=not pushed.created)


def listing(engine: Engine, principal: PrincipalContext) -> SkillsOut:
    with tenant_session(engine, principal.tenant_id) as session:
        skills = resolved_skills(session, principal.tenant_id, principal.agent_id)
    return SkillsOut(items=[SkillSummaryOut.of(skill) for skill in skills])


def show(engine: Engine, principal: PrincipalContext, name: str) -> SkillOut:
    with tenant_session(engine, principal.tenant_id) as session:
        return SkillOut.of(resolved_skill(session, principal.tenant_id, principal.agent_id, name))


def versions(engine: Engine, principal: PrincipalContext, name: str) -> SkillVersionsOut:
    """The SYSTEM skill of the name and every stored version in the tenant; a name with neither is a 404."""
    shipped = system_skills().get(name)
    with tenant_session(engine, principal.tenant_id) as session:
        rows = store.versions(session, principal.tenant_id, name)
        items = [SkillVersionOut.row(row) for row in rows]
    if shipped is None and not items:
        raise NotFound(f"no skill {name!r}: GET /skills lists yours", code="skill_not_found", details={"name": name})
    system = ProvenanceOut.of(Layer(SkillSpace.SYSTEM, "", None, shipped)) if shipped is not None else None
    return SkillVersionsOut(name=name, system=system, items=items)
