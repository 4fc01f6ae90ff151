"""A record's data against its declaration's JSON Schema: strict, every problem named by its JSON Pointer.

Unknown keys, missing fields, wrong JSON types, nulls, malformed refs and timestamps without a time zone
(or outside the years every request may name) are refused with a 422 ``invalid_record``-family code;
``details.problems`` lists each one (the first 20) with its path, in :mod:`memory.schema_problems`' vocabulary.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from memory import schema_problems
from memory.errors import InvalidInput
from memory.resources import pointers
from memory.resources.declarations import Declaration

EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
"""The range every timestamp of a request lies in (the API's rule for its own bodies, README "Using the API")."""

_formats = FormatChecker(formats=())


@_formats.checks("date-time", raises=ValueError)
def _is_timestamp(value: object) -> bool:
    """ISO 8601 with a time zone, inside [EARLIEST, LATEST); a non-string is the ``type`` keyword's business."""
    if not isinstance(value, str):
        return True
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError("a timestamp needs a time zone, e.g. 2026-06-01T09:00:00Z")
    if not EARLIEST <= parsed < LATEST:
        raise ValueError("timestamps lie from 1900-01-01T00:00:00Z up to (not including) 2200-01-01T00:00:00Z")
    return True


@cache
def _validator(declaration: Declaration) -> Draft202012Validator:
    return Draft202012Validator(declaration.schema, format_checker=_formats)


def _ref_code(declaration: Declaration) -> schema_problems.CodeOf:
    """A declared ref field's pattern refuses with ``invalid_ref`` (the rest keeps the shared codes)."""

    def code_of(error: ValidationError) -> str | None:
        tokens = [str(part) for part in error.absolute_path]
        return "invalid_ref" if error.validator == "pattern" and _is_ref_field(declaration, tokens) else None

    return code_of


def _is_ref_field(declaration: Declaration, tokens: list[str]) -> bool:
    for declared in declaration.refs:
        pattern = pointers.parse(declared)
        if len(pattern) == len(tokens) and all(
            wanted in (token, pointers.WILDCARD) for wanted, token in zip(pattern, tokens, strict=True)
        ):
            return True
    return False


def check_record(declaration: Declaration, data: dict[str, Any]) -> None:
    """Raise :class:`InvalidInput` listing what in ``data`` the declaration's schema refuses."""
    errors = schema_problems.ordered_errors(_validator(declaration), data)
    if not errors:
        return
    problems = schema_problems.problems(errors, code_of=_ref_code(declaration))
    first = problems[0]
    raise InvalidInput(
        f"the {declaration.type} record is refused: {first['message']}",
        code=first["code"],
        details={"problems": problems, "refused": len(errors)},
    )
