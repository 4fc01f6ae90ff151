"""Skills over HTTP: push a directory (TENANT, or an AGENT overlay), read the caller's skills resolved per request.
Rules in :mod:`memory.skills`, calls in :mod:`api.services.skills`; this module only translates HTTP."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from api.deps import CurrentPrincipal, EngineDep
from api.errors import Refused
from api.schemas.skills import SkillOut, SkillPushIn, SkillPushOut, SkillsOut, SkillVersionsOut
from api.services import skills
from memory.errors import InvalidInput
from memory.skills.format import NAME

router = APIRouter(tags=["skills"])
SkillName = Annotated[str, Path(pattern=NAME.pattern, description="e.g. monthly-report")]


@router.post(
    "/skills",
    status_code=status.HTTP_201_CREATED,
    response_model=SkillPushOut,
    responses={200: {"model": SkillPushOut, "description": "The latest version already held this very tree"}},
)
def push(
    body: SkillPushIn, principal: CurrentPrincipal, engine: EngineDep, response: Response,
    agent: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9][A-Za-z0-9@._:-]{0,127}$", description=(
        "AGENT space, admin only: the agent the overlay is for (default: the key's agent)"))] = None,
) -> SkillPushOut:
    """Push a skill directory (its name is SKILL.md's): 201 a new version, 200 the latest version's tree again.
    A TENANT skill needs the admin role; an AGENT overlay is the key's agent's (an admin may name any agent) and
    needs a SYSTEM or TENANT skill of its name under it (422 ``skill_base_missing``). Every problem of the files
    is a 422 naming the file and the field."""
    try:
        pushed = skills.push(engine, principal, body, agent)
    except InvalidInput as exc:
        raise Refused.of(exc) from None
    if pushed.replayed:
        response.status_code = status.HTTP_200_OK
    return pushed


@router.get("/skills", response_model=SkillsOut)
def list_skills(principal: CurrentPrincipal, engine: EngineDep) -> SkillsOut:
    """The caller's skills, resolved now: SYSTEM, the tenant's, and the key's agent's overlays, field by field."""
    return skills.listing(engine, principal)


@router.get("/skills/{name}", response_model=SkillOut)
def get_skill(name: SkillName, principal: CurrentPrincipal, engine: EngineDep) -> SkillOut:
    """One skill resolved for the caller, each field with its provenance (space, version, tree sha256); 404
    ``skill_not_found`` for a name the caller has no skill of."""
    return skills.show(engine, principal, name)


@router.get("/skills/{name}/versions", response_model=SkillVersionsOut)
def list_versions(name: SkillName, principal: CurrentPrincipal, engine: EngineDep) -> SkillVersionsOut:
    """Every stored version of the skill in the tenant (TENANT and every agent's overlays) and its SYSTEM one."""
    return skills.versions(engine, principal, name)
