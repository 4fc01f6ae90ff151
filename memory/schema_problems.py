"""What a JSON Schema refuses in a document, as problems a caller can act on: ``{"path", "code", "message"}``.

One vocabulary for every schema mnemo checks data against (a record's declaration, a task's goal), so a client
handles ``unknown_field`` or ``missing_field`` the same way wherever it meets one. The callers decide the refinements
their schemas need (a ref field's pattern, a node's own code) through ``code_of``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

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
"""The code of a problem by the schema keyword that refused it; any other keyword is ``invalid_value``."""

CodeOf = Callable[[ValidationError], str | None]
"""A caller's own code for an error, or None for the default of :data:`CODES`."""


def escape(token: str) -> str:
    """A JSON Pointer token (RFC 6901): ``~`` and ``/`` escaped."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer(parts: Iterable[object], prefix: str = "") -> str:
    """The JSON Pointer of a path of keys and indexes, under ``prefix`` (``/`` for the root itself)."""
    return prefix + "".join(f"/{escape(str(part))}" for part in parts) or "/"


def shortened(error: ValidationError) -> str:
    """The validator's sentence with the refused value (which it quotes whole) cut to :data:`MAX_ECHO_CHARS`."""
    quoted = repr(error.instance)
    if len(quoted) <= MAX_ECHO_CHARS or quoted not in error.message:
        return error.message
    return error.message.replace(quoted, quoted[:MAX_ECHO_CHARS] + "…")


def ordered_errors(validator: Draft202012Validator, data: object) -> list[ValidationError]:
    """Every error of ``data``, in the order of their paths (a stable answer for the same document)."""
    return sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])


def problem(error: ValidationError, *, prefix: str = "", code_of: CodeOf | None = None) -> dict[str, str]:
    """One error as a problem: its path (under ``prefix``), its code and a sentence that starts with the path."""
    path = pointer(error.absolute_path, prefix)
    code = (code_of(error) if code_of else None) or CODES.get(str(error.validator), "invalid_value")
    return {"path": path, "code": code, "message": f"{path}: {shortened(error)}"}


def problems(errors: list[ValidationError], *, prefix: str = "", code_of: CodeOf | None = None) -> list[dict[str, str]]:
    """The first :data:`MAX_PROBLEMS` errors as problems."""
    return [problem(error, prefix=prefix, code_of=code_of) for error in errors[:MAX_PROBLEMS]]
