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
from memory.identity.auth import PrincipalContext, require_role
from memory.reports.definitions import BUILTIN
from memory.tasks import definition_store, registry
from memory.tasks.definition_store import StoredDefinition
from memory.tasks.definitions import Definition, check_llm_endpoint, from_body, runnable
from memory.tasks.resolve import check_registrable

Source = Literal["builtin", "code", "tenant"]


def register(engine: Engine, principal: PrincipalContext, task_type: str, body: object, *,
             llm_configured: bool) -> DefinitionPutOut:
    """Register a version of the tenant's type (admin): ``replayed`` when this very body was registered already."""
    require_role(principal, Role.ADMIN, to="registering a task definition")
    check_registrable(task_type)
    definition = runnable(from_body(task_type, body))
    check_llm_endpoint(definition, configured=llm_configured)
    with tenant_session(engine, principal.tenant_id) as session:
        created = definition_store.put_definition(session, principal.tenant_id, definition, principal.user_id)
    return DefinitionPutOut(task_type=task_type, version=definition.version, sha256=definition.sha256,
                            replayed=not created)


def _code_types() -> dict[str, tuple[Source, Definition]]:
    """The types the modules loaded here declare: mnemo's own (``builtin``) and SDK modules' (``code``)."""
    found: dict[str, tuple[Source, Definition]] = {}
    for task_type in registry.task_types():
        definition = registry.definition(task_type)
        if definition is not None:
            found[task_type] = ("builtin" if task_type in BUILTIN else "code", definition)
    return found


def _summary(source: Source, versions: list[Definition]) -> DefinitionSummaryOut:
    latest = versions[-1]
    return DefinitionSummaryOut(
        task_type=latest.task_type, source=source, latest_version=latest.version,
        versions=[version.version for version in versions],
        steps=[StepOut(step_id=step.step_id, kind=step.kind) for step in latest.steps],
    )


def listing(engine: Engine, principal: PrincipalContext) -> DefinitionsOut:
    """Every type a task of the tenant may be started with, by name: the code types and the tenant's (a tenant's
    type a code module declared since is shadowed by it, as :func:`memory.tasks.resolve.resolve_definition` does)."""
    with tenant_session(engine, principal.tenant_id) as session:
        own = definition_store.listing(session, principal.tenant_id)
    code = _code_types()
    items = [_summary(source, [definition]) for source, definition in code.values()]
    items += [_summary("tenant", [stored.definition for stored in versions])
              for task_type, versions in own.items() if task_type not in code]
    return DefinitionsOut(items=sorted(items, key=lambda item: item.task_type))


def _version(definition: Definition, stored: StoredDefinition | None) -> DefinitionVersionOut:
    return DefinitionVersionOut(
        version=definition.version, sha256=definition.sha256, body=dict(definition.body),
        created_at=stored.created_at if stored else None, created_by=stored.created_by if stored else None,
    )


def show(engine: Engine, principal: PrincipalContext, task_type: str) -> DefinitionOut:
    """A type with every version, oldest first; a type the tenant cannot start is a 404."""
    code = _code_types().get(task_type)
    if code is not None:
        return DefinitionOut(task_type=task_type, source=code[0], versions=[_version(code[1], None)])
    with tenant_session(engine, principal.tenant_id) as session:
        versions = definition_store.versions(session, principal.tenant_id, task_type)
    return DefinitionOut(task_type=task_type, source="tenant",
                         versions=[_version(stored.definition, stored) for stored in versions])
