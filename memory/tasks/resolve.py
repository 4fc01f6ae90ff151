"""Which definition a new task of a type runs: the one place a task type is looked up when a task starts.

A type has one source. Code types (:mod:`memory.tasks.registry`: mnemo's own and the SDK modules this process
loaded) are the same for every tenant and may not be registered by one (409 ``task_type_reserved``); every other
type is a tenant's own (:mod:`memory.tasks.definition_store`, ``PUT /task-definitions``), its latest version. The
goal is then checked by :func:`memory.tasks.goals.check_goal`.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from memory.errors import Conflict, InvalidInput
from memory.tasks import definition_store, registry
from memory.tasks.definitions import Definition, runnable


def check_registrable(task_type: str) -> None:
    """A tenant may register any type no code module owns: one type, one source."""
    if task_type in registry.task_types():
        raise Conflict(f"{task_type!r} is declared by a task module loaded on this server (mnemo's own or an SDK "
                       "module): register yours under another name", code="task_type_reserved",
                       details={"task_type": task_type})


def resolve_definition(session: Session, tenant_id: str, task_type: str) -> Definition:
    """The definition a new task of ``task_type`` pins: the code type's, else the tenant's latest version; a type
    neither knows is a 422 ``invalid_value`` listing the ones there are, a type both know a 409
    ``task_type_ambiguous``."""
    code, own = registry.definition(task_type), definition_store.latest(session, tenant_id, task_type)
    if code is not None and own is not None:
        # Registered while a server without the module answered (a rolling deploy, servers loading different
        # modules): starting either could be the wrong one, so neither starts until one of them is renamed.
        raise Conflict(
            f"{task_type!r} is both a type this tenant registered and one a task module loaded here declares; "
            "register the tenant's under another name (every server must load the same task modules)",
            code="task_type_ambiguous", details={"task_type": task_type})
    found = code or (runnable(own) if own is not None else None)  # a body registered before the rule: refused now
    if found is None:
        known = sorted({*registry.task_types(), *definition_store.listing(session, tenant_id)})
        raise InvalidInput(
            f"unknown task type {task_type!r}; the registered types are: {', '.join(known) or 'none'}",
            code="invalid_value", details={"field": "task_type"},
        )
    return found
