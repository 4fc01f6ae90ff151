"""Task types as data (issue 26): an admin registers a version of a type, any key of the tenant reads them.
The rules are in :mod:`api.services.task_definitions` and ``memory.tasks``; this module only translates HTTP."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response, status

from api.deps import CurrentPrincipal, EngineDep, SettingsDep
from api.schemas.task_definitions import DEFINITION_SCHEMA, DefinitionOut, DefinitionPutOut, DefinitionsOut
from api.services import task_definitions
from memory.tasks.definitions import TASK_TYPE

router = APIRouter(tags=["tasks"])
TaskType = Annotated[str, Path(pattern=TASK_TYPE.pattern, description="e.g. incident-digest")]


@router.put(
    "/task-definitions/{task_type}",
    status_code=status.HTTP_201_CREATED,
    response_model=DefinitionPutOut,
    responses={200: {"model": DefinitionPutOut, "description": "This very body was registered already"}},
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": DEFINITION_SCHEMA}}}},
)
def put_definition(task_type: TaskType, body: Annotated[dict[str, Any], Body()], principal: CurrentPrincipal,
                   engine: EngineDep, settings: SettingsDep, response: Response) -> DefinitionPutOut:
    """Register a version of a task type (admin): 201 new, 200 the same body again, 409
    ``definition_version_conflict`` for another body under a registered version, 409 ``task_type_reserved`` for
    mnemo's own types; an ``llm`` step where no LLM endpoint is configured is a 422 ``llm_endpoint_not_configured``."""
    registered = task_definitions.register(engine, principal, task_type, body,
                                           llm_configured=settings.llm_config() is not None)
    if registered.replayed:
        response.status_code = status.HTTP_200_OK
    return registered


@router.get("/task-definitions", response_model=DefinitionsOut)
def list_definitions(principal: CurrentPrincipal, engine: EngineDep) -> DefinitionsOut:
    """Every task type the tenant's tasks may start with (mnemo's built-in ones and the tenant's), by name."""
    return task_definitions.listing(engine, principal)


@router.get("/task-definitions/{task_type}", response_model=DefinitionOut)
def get_definition(task_type: TaskType, principal: CurrentPrincipal, engine: EngineDep) -> DefinitionOut:
    """A task type with every version's body, oldest first; an unknown type is a 404 ``task_type_not_found``."""
    return task_definitions.show(engine, principal, task_type)
