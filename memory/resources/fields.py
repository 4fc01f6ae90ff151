"""The readable part of a record (seed 000 §2.2): only the values under granted field paths, parents checked.

Granting ``/participants/*/display_name`` yields ``{"participants": [{"display_name": ...}, ...]}``:
every item keeps its place (an item without the field is ``{}``), and nothing else under
``participants`` comes along.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from memory.resources import pointers

_MISSING = object()


def readable(data: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """A new document holding exactly the values of ``data`` that some path of ``fields`` covers."""
    result: dict[str, Any] = {}
    for path in fields:
        part = _project(data, pointers.parse(path))
        if part is not _MISSING:
            result = _merge(result, part)
    return result


def _project(node: Any, tokens: tuple[str, ...]) -> Any:
    if not tokens:
        return copy.deepcopy(node)
    head, rest = tokens[0], tokens[1:]
    if head == pointers.WILDCARD:
        if not isinstance(node, list):
            return _MISSING
        items = [_project(item, rest) for item in node]
        return [({} if isinstance(original, dict) else None) if item is _MISSING else item
                for item, original in zip(items, node, strict=True)]
    if isinstance(node, dict) and head in node:
        inner = _project(node[head], rest)
        return _MISSING if inner is _MISSING else {head: inner}
    return _MISSING


def _merge(left: Any, right: Any) -> Any:
    """Two projections of the same document: objects by key, arrays item by item (same length, same source)."""
    if isinstance(left, dict) and isinstance(right, dict):
        merged = dict(left)
        for key, value in right.items():
            merged[key] = _merge(merged[key], value) if key in merged else value
        return merged
    if isinstance(left, list) and isinstance(right, list):
        return [_merge(a, b) if a is not None and b is not None else (a if b is None else b)
                for a, b in zip(left, right, strict=True)]
    return right


def without(data: dict[str, Any], paths: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """``data`` without the values at ``paths`` (no ``*``), and the paths that were present."""
    trimmed = copy.deepcopy(data)
    omitted = [path for path in paths if pointers.pop_at(trimmed, path)[0]]
    return trimmed, omitted
