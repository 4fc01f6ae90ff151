"""Task definitions for the ``/task-definitions`` endpoints and the CLI: mnemo's built-in types beside a tenant's
own. A tenant registers, mnemo's types are read-only; the rules are :mod:`memory.tasks.definitions` (the body),
:mod:`memory.tasks.definition_store` (versions) and who may register (an admin)."""

from __future__ import annotations

from typing import Literal

from sqlalchemy import Engine

from api.schemas.task_definitions import (
    DefinitionOut,
    DefinitionPutOut,
    DefinitionsOut,
    DefinitionSummaryOut,
    DefinitionVersionOut,
    StepOut,
)
from memory.db import tenant_session
from memory.enums import Role
from memory.errors import Conflict
from memory.identity.auth import PrincipalContext, require_role
from memory.reports.definitions import BUILTIN
from memory.tasks import definition_store
from memory.tasks.definition_store import StoredDefinition
from memory.tasks.definitions import Definition, check_llm_endpoint, from_body


def register(engine: Engine, principal: PrincipalContext, task_type: str, body: object, *,
             llm_configured: bool) -> DefinitionPutOut:
    """Register a version of the tenant's type (admin): ``replayed`` when this very body was registered already."""
    require_role(principal, Role.ADMIN, to="registering a task definition")
    if task_type in BUILTIN:
        raise Conflict(f"{task_type!r} is one of mnemo's own task types: register yours under another name",
                       code="task_type_reserved", details={"task_type": task_type})
    definition = from_body(task_type, body)
    check_llm_endpoint(definition, configured=llm_configured)
    with tenant_session(engine, principal.tenant_id) as session:
        created = definition_store.put_definition(session, principal.tenant_id, definition, principal.user_id)
    return DefinitionPutOut(task_type=task_type, version=definition.version, sha256=definition.sha256,
                            replayed=not created)


def _summary(source: Literal["builtin", "tenant"], versions: list[Definition]) -> DefinitionSummaryOut:
    latest = versions[-1]
    return DefinitionSummaryOut(
        task_type=latest.task_type, source=source, latest_version=latest.version,
        versions=[version.version for version in versions],
        steps=[StepOut(step_id=step.step_id, kind=step.kind) for step in latest.steps],
    )


def listing(engine: Engine, principal: PrincipalContext) -> DefinitionsOut:
    """Every type a task of the tenant may be started with, by name: mnemo's and the tenant's."""
    with tenant_session(engine, principal.tenant_id) as session:
        own = definition_store.listing(session, principal.tenant_id)
    items = [_summary("builtin", [definition]) for definition in BUILTIN.values()]
    items += [_summary("tenant", [stored.definition for stored in versions]) for versions in own.values()]
    return DefinitionsOut(items=sorted(items, key=lambda item: item.task_type))


def _version(definition: Definition, stored: StoredDefinition | None) -> DefinitionVersionOut:
    return DefinitionVersionOut(
        version=definition.version, sha256=definition.sha256, body=dict(definition.body),
        created_at=stored.created_at if stored else None, created_by=stored.created_by if stored else None,
    )


def show(engine: Engine, principal: PrincipalContext, task_type: str) -> DefinitionOut:
    """A type with every version, oldest first; a type the tenant cannot start is a 404."""
    if task_type in BUILTIN:
        return DefinitionOut(task_type=task_type, source="builtin", versions=[_version(BUILTIN[task_type], None)])
    with tenant_session(engine, principal.tenant_id) as session:
        versions = definition_store.versions(session, principal.tenant_id, task_type)
    return DefinitionOut(task_type=task_type, source="tenant",
                         versions=[_version(stored.definition, stored) for stored in versions])
