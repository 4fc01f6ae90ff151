"""A task's goal against its definition's ``goal_schema``: every problem named by its path under ``/goal``.

The codes are the ones every schema check of mnemo answers with (:mod:`memory.schema_problems`), so a client
handles a goal's ``missing_field`` like a record's. A definition speaks its own language where it needs to: a schema
node's ``"x-mnemo-code"`` is the code of every problem at that node (the monthly report's currency enum says
``unsupported_currency``), with no special case here.
"""

from __future__ import annotations

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from memory import schema_problems
from memory.errors import InvalidInput
from memory.tasks.definitions import CODE_KEYWORD, Definition


def _own_code(error: ValidationError) -> str | None:
    code = error.schema.get(CODE_KEYWORD) if isinstance(error.schema, dict) else None
    return code if isinstance(code, str) else None


def check_goal(definition: Definition, goal: object) -> None:
    """A 422 whose code is the first problem's, ``details.problems`` listing each (the first 20), unless the goal
    satisfies the definition's schema."""
    errors = schema_problems.ordered_errors(Draft202012Validator(dict(definition.goal_schema)), goal)
    if not errors:
        return
    problems = schema_problems.problems(errors, prefix="/goal", code_of=_own_code)
    first = problems[0]
    raise InvalidInput(
        f"the goal of a {definition.task_type} task is refused: {first['message']}"
        + (f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""),
        code=first["code"],
        details={"problems": problems, "refused": len(errors)},
    )
