"""A tool call's arguments, checked against the tool's input schema (the catalog's) before any handler runs,
so bad input gets mnemo's typed error as REST does: an argument the tool does not take is ``unknown_field``
(a misspelt ``top_k`` is never silently ignored), a value the schema refuses is ``invalid_value`` naming it.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from memory.errors import InvalidInput


def check_arguments(tool: str, schema: dict[str, Any], arguments: Any) -> None:
    """Raise :class:`InvalidInput` for the first problem of ``arguments`` (a JSON object) under ``schema``."""
    if not isinstance(arguments, dict):
        raise InvalidInput(f"{tool}: the arguments must be a JSON object", code="invalid_value")
    unknown = sorted(set(arguments) - set(schema.get("properties", {})))
    if unknown:
        taken = ", ".join(sorted(schema.get("properties", {}))) or "none"
        raise InvalidInput(f"{tool}: unknown argument {unknown[0]!r}; it takes: {taken}", code="unknown_field",
                           details={"unknown": unknown})
    # best_match looks inside anyOf (an optional argument is "this type or null") for the deepest problem.
    error = best_match(Draft202012Validator(schema).iter_errors(arguments))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        raise InvalidInput(f"{tool}: {where}: {error.message}", code="invalid_value", details={"argument": where})
