"""Published knowledge over HTTP: the tenant's items and every version of one. Reads in
:mod:`api.services.knowledge`; this module only translates HTTP."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api.deps import CurrentPrincipal, EngineDep
from api.schemas.knowledge import KnowledgeListOut, KnowledgeVersionsOut
from api.services import knowledge
from api.services.knowledge import KnowledgeFilter

router = APIRouter(tags=["knowledge"])


@router.get("/knowledge", response_model=KnowledgeListOut)
def list_knowledge(
    principal: CurrentPrincipal, engine: EngineDep,
    status: Annotated[Literal["ACTIVE", "SUPERSEDED", "WITHDRAWN"], Query()] = "ACTIVE",
    key: Annotated[str | None, Query(max_length=128)] = None,
    scope: Annotated[Literal["TENANT", "PROJECT"] | None, Query()] = None,
    project_id: Annotated[str | None, Query(max_length=200)] = None,
    authority: Annotated[Literal["P0", "P1", "P2", "P3"] | None, Query()] = None,
) -> KnowledgeListOut:
    """Published versions (by default the ACTIVE ones), newest first."""
    return knowledge.list_knowledge(engine, principal, KnowledgeFilter(status, key, scope, project_id, authority))


@router.get("/knowledge/{knowledge_id}", response_model=KnowledgeVersionsOut)
def get_knowledge(knowledge_id: str, principal: CurrentPrincipal, engine: EngineDep) -> KnowledgeVersionsOut:
    """Every version of an item, newest first (404 ``knowledge_not_found``)."""
    return knowledge.show_knowledge(engine, principal, knowledge_id)
