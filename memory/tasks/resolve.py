"""Which definition a new task of a type runs, and whether its goal fits that definition's goal schema.

:func:`resolve_definition` is the one place a task type is looked up when a task starts: today the code types of
:mod:`memory.tasks.registry`; a tenant's own definitions (``PUT /task-definitions``) join here.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from memory import schema_problems
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


@cache
def _validator(schema_json: str) -> Draft202012Validator:
    """One compiled validator per distinct schema (a goal schema is checked on every start of its type)."""
    return Draft202012Validator(json.loads(schema_json))


def check_goal(definition: Definition, goal: Any) -> None:
    """Refuse a goal its schema refuses: the first problem's code, every problem (``/goal/...``) in the details."""
    validator = _validator(json.dumps(definition.goal_schema, sort_keys=True))
    problems = schema_problems.problems(validator, goal, prefix="/goal")
    if problems:
        raise InvalidInput(
            f"the goal of a {definition.task_type} task is refused: {problems[0]['message']}",
            code=problems[0]["code"],
            details={"problems": problems},
        )
