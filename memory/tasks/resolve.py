"""Which definition a new task of a type runs: the one place a task type is looked up when a task starts.

Today the code types of :mod:`memory.tasks.registry` (SDK modules); a tenant's own definitions
(:mod:`memory.tasks.definition_store`, ``PUT /task-definitions``) join here. The goal is then checked by
:func:`memory.tasks.goals.check_goal`.
"""

from __future__ import annotations

from memory.errors import InvalidInput
from memory.tasks import registry
from memory.tasks.definitions import Definition


def resolve_definition(task_type: str) -> Definition:
    """The definition a new task of ``task_type`` pins; an unregistered type is a 422 ``invalid_value``."""
    found = registry.definition(task_type)
    if found is None:
        known = ", ".join(sorted(registry.task_types())) or "none"
        raise InvalidInput(
            f"unknown task type {task_type!r}; the registered types are: {known}",
            code="invalid_value", details={"field": "task_type"},
        )
    return found
