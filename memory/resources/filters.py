"""The filters of ``list`` as query parameters: only those the type declares, each parsed by its declared type.

Syntax (README "Resources"): ``<name>=<value>`` is equality for every filter type; a timestamp, integer or
number filter also takes ``<name>_from=<value>`` (at or after, inclusive) and ``<name>_before=<value>``
(strictly before). Values: a string as is; a ref as ``<type>:<id>`` of the type the field names;
``true`` / ``false``; an integer or a decimal number; an ISO 8601 timestamp with a time zone in
[1900, 2200). Anything else — an undeclared name, a value of another type, a filter on a field the
caller may not read — is a typed 422, never an ignored condition.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime

from memory.errors import InvalidInput
from memory.resources.access import Grant
from memory.resources.declarations import RECORD_ID, Declaration, Filter, FilterType
from memory.resources.sources import FilterClause, FilterOp
from memory.resources.validation import EARLIEST, LATEST

RANGED = frozenset({FilterType.TIMESTAMP, FilterType.INTEGER, FilterType.NUMBER})
SUFFIXES = {"_from": FilterOp.FROM, "_before": FilterOp.BEFORE}
INTEGER = re.compile(r"-?[0-9]{1,18}")
NUMBER = re.compile(r"-?[0-9]{1,18}(\.[0-9]{1,18})?([eE][-+]?[0-9]{1,3})?")
MAX_VALUE_CHARS = 1_000


def _named(declaration: Declaration, name: str) -> tuple[Filter, FilterOp]:
    declared = declaration.filters.get(name)
    if declared is not None:
        return declared, FilterOp.EQUALS
    for suffix, op in SUFFIXES.items():
        base = declaration.filters.get(name.removesuffix(suffix)) if name.endswith(suffix) else None
        if base is not None and base.type in RANGED:
            return base, op
    accepted = sorted(
        [*declaration.filters]
        + [f.name + suffix for f in declaration.filters.values() if f.type in RANGED for suffix in SUFFIXES]
    )
    raise InvalidInput(
        f"{declaration.type} has no filter {name!r}; it takes: {', '.join(accepted) or 'none'}",
        code="unknown_filter", details={"filter": name, "accepted": accepted},
    )


def parse_filters(declaration: Declaration, grant: Grant, raw: Mapping[str, str]) -> list[FilterClause]:
    clauses: list[FilterClause] = []
    for name, text in sorted(raw.items()):
        declared, op = _named(declaration, name)
        if not grant.reads(declared.path):
            raise InvalidInput(f"filter {name!r} compares {declared.path}, a field you may not read",
                               code="filter_not_readable", details={"filter": name})
        clauses.append(FilterClause(declared, op, _value(declaration, declared, name, text)))
    return clauses


def _value(declaration: Declaration, declared: Filter, name: str, text: str) -> str | bool | int | float | datetime:
    def refuse(expected: str) -> InvalidInput:
        return InvalidInput(f"filter {name!r} takes {expected}, not {text[:80]!r}", code="invalid_filter_value",
                            details={"filter": name})

    if not text or len(text) > MAX_VALUE_CHARS:
        raise refuse(f"a value of 1-{MAX_VALUE_CHARS} characters")
    kind = declared.type
    if kind is FilterType.STRING:
        return text
    if kind is FilterType.REF:
        target = declaration.refs[declared.path]
        if not re.fullmatch(rf"{target}:{RECORD_ID}", text):
            raise refuse(f"a ref `{target}:<id>`")
        return text
    if kind is FilterType.BOOLEAN:
        if text not in ("true", "false"):
            raise refuse("true or false")
        return text == "true"
    if kind is FilterType.INTEGER:
        if not INTEGER.fullmatch(text):
            raise refuse("an integer")
        return int(text)
    if kind is FilterType.NUMBER:
        if not NUMBER.fullmatch(text) or not math.isfinite(float(text)):
            raise refuse("a number")
        return float(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(f"filter {name!r} takes an ISO 8601 timestamp with a time zone, not {text[:80]!r}",
                           code="invalid_timestamp", details={"filter": name}) from exc
    if moment.tzinfo is None:
        raise InvalidInput(f"filter {name!r}: a timestamp needs a time zone, e.g. 2026-06-01T09:00:00Z",
                           code="invalid_timestamp", details={"filter": name})
    if not EARLIEST <= moment < LATEST:
        raise InvalidInput(f"filter {name!r}: timestamps lie from 1900-01-01T00:00:00Z up to (not including) "
                           "2200-01-01T00:00:00Z", code="timestamp_out_of_range", details={"filter": name})
    return moment
