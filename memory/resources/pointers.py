"""Field paths: JSON Pointers (RFC 6901) where ``*`` stands for every item of an array.

A declaration names its fields this way (``/participants/*/display_name``); the same path finds the
field's schema (:func:`schema_at`) and its values in a record (:func:`values_at`), so what the checks
accept at start-up is exactly what a write and a read walk.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memory.schema_problems import escape as escape  # one escape for every JSON Pointer mnemo writes

WILDCARD = "*"


class PointerError(ValueError):
    """A path that is not a JSON Pointer, or that the schema does not have."""


def parse(path: str) -> tuple[str, ...]:
    """The unescaped tokens of ``path`` (``~1`` is ``/``, ``~0`` is ``~``); the root ``""`` is refused."""
    if not path.startswith("/"):
        raise PointerError(f"{path!r} is not a JSON Pointer: it must start with '/'")
    tokens = tuple(token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/"))
    if any(token == "" for token in tokens):
        raise PointerError(f"{path!r} has an empty segment")
    return tokens


def schema_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The sub-schema ``path`` names: a name descends into ``properties``, ``*`` into an array's ``items``."""
    node = schema
    walked = ""
    for token in parse(path):
        if token == WILDCARD:
            if node.get("type") != "array" or not isinstance(node.get("items"), dict):
                raise PointerError(f"{path!r}: {walked or '/'} is not an array, so '*' has nothing to stand for")
            node = node["items"]
        else:
            properties = node.get("properties") if node.get("type") == "object" else None
            if not isinstance(properties, dict) or token not in properties:
                raise PointerError(f"{path!r}: the schema has no field {walked}/{escape(token)}")
            node = properties[token]
        walked += "/" + escape(token)
    return node


def values_at(data: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every value at ``path`` in ``data`` with its concrete pointer (``*`` expanded to indexes), in order.

    A field that is absent yields nothing: optional fields are simply not there.
    """

    def walk(node: Any, tokens: tuple[str, ...], at: str) -> Iterator[tuple[str, Any]]:
        if not tokens:
            yield at, node
            return
        head, rest = tokens[0], tokens[1:]
        if head == WILDCARD:
            if isinstance(node, list):
                for index, item in enumerate(node):
                    yield from walk(item, rest, f"{at}/{index}")
        elif isinstance(node, dict) and head in node:
            yield from walk(node[head], rest, f"{at}/{escape(head)}")

    yield from walk(data, parse(path), "")


def pop_at(data: dict[str, Any], path: str) -> tuple[bool, Any]:
    """Remove the value at a path without ``*``: ``(True, value)``, or ``(False, None)`` when it is absent."""
    *parents, last = parse(path)
    node: Any = data
    for token in parents:
        if not isinstance(node, dict) or token not in node:
            return False, None
        node = node[token]
    if not isinstance(node, dict) or last not in node:
        return False, None
    return True, node.pop(last)


def put_at(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a path without ``*`` whose parent objects exist (as :func:`pop_at` left them)."""
    *parents, last = parse(path)
    node: Any = data
    for token in parents:
        node = node[token]
    node[last] = value


def covers(parent: str, child: str) -> bool:
    """Whether granting ``parent`` grants ``child``: the same path or one of its ancestors."""
    head = parse(parent)
    return parse(child)[: len(head)] == head
