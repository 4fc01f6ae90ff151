"""JSON Schema refusals as mnemo's problems: ``{"path", "code", "message"}``, each named by its JSON Pointer.

One vocabulary for every body checked against a JSON Schema (a resource's record, a task's goal), so a client
reads the same codes wherever it is refused.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

MAX_PROBLEMS = 20
MAX_ECHO_CHARS = 80
"""A refused value is quoted in its problem's message up to this many characters: the answer names the value, it
does not send a megabyte back."""

CODES = {
    "additionalProperties": "unknown_field",
    "required": "missing_field",
    "type": "invalid_type",
    "format": "invalid_timestamp",
    "enum": "invalid_value",
}
CODE_KEYWORD = "x-mnemo-code"
"""A schema node may name the code of every problem at it (e.g. ``unsupported_currency``): data, not a special case."""


def escape(token: str) -> str:
    """A JSON Pointer token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer(error: ValidationError, prefix: str = "") -> str:
    return prefix + "".join(f"/{escape(str(part))}" for part in error.absolute_path) or "/"


def shortened(error: ValidationError) -> str:
    """The validator's sentence with the refused value (which it quotes whole) cut to :data:`MAX_ECHO_CHARS`."""
    quoted = repr(error.instance)
    if len(quoted) <= MAX_ECHO_CHARS or quoted not in error.message:
        return error.message
    return error.message.replace(quoted, quoted[:MAX_ECHO_CHARS] + "…")


def code_of(error: ValidationError) -> str:
    """The node's own ``x-mnemo-code`` when it has one, else the keyword's code (``invalid_value`` by default)."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    own = schema.get(CODE_KEYWORD)
    return own if isinstance(own, str) else CODES.get(str(error.validator), "invalid_value")


def ordered(validator: Draft202012Validator, data: Any) -> list[ValidationError]:
    """Every error, in path order (the first is the one a 422 names)."""
    return sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])


def problem(error: ValidationError, code: str, prefix: str = "") -> dict[str, str]:
    path = pointer(error, prefix)
    return {"path": path, "code": code, "message": f"{path}: {shortened(error)}"}


def problems(validator: Draft202012Validator, data: Any, prefix: str = "") -> list[dict[str, str]]:
    """The first :data:`MAX_PROBLEMS` problems of ``data``, paths under ``prefix`` (e.g. ``/goal``)."""
    return [problem(error, code_of(error), prefix) for error in ordered(validator, data)[:MAX_PROBLEMS]]
