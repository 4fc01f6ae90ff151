"""One resource type's declaration (seed 000 §2.2): its fields' JSON Schema, the fields search matches,
the filters list takes, the refs it holds, its long fields, its operations and, per audience, the ceiling
of the fields that audience may ever read.

Declarations are data (``memory/resources/builtin/*.json``), parsed and checked here when the process
starts: a path the schema does not have, a filter on an unknown field or of the wrong type, an open
object (unknown keys would pass) — each refuses the start with a :class:`DeclarationError` naming the
type, the file and the problem, so no request ever meets a declaration that cannot be honoured.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from memory.resources import pointers
from memory.resources.pointers import PointerError


class Operation(StrEnum):
    LIST = "list"
    SEARCH = "search"
    READ = "read"


class Audience(StrEnum):
    """Who reads: mnemo's own agents (``internal``) or external MCP clients (``public``, seed 000 §3)."""

    INTERNAL = "internal"
    PUBLIC = "public"


class FilterType(StrEnum):
    """What a filter compares, and so which schema type its field must have."""

    STRING = "string"
    TIMESTAMP = "timestamp"
    BOOLEAN = "boolean"
    INTEGER = "integer"
    NUMBER = "number"
    REF = "ref"


class DeclarationError(ValueError):
    """A declaration that cannot be honoured: the process refuses to start."""


TYPE_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
RECORD_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
"""A record's id, in a path and after the ``type:`` of a ref. These patterns are matched whole (``fullmatch``, or
``\\Z`` in a schema's pattern), never with ``$``, which also matches before a trailing newline."""
FILTER_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
RESERVED_FILTERS = frozenset({"cursor"})
"""Query parameters of ``list`` that are not filters."""
KEYS = frozenset({"type", "description", "title", "operations", "schema", "search_fields", "filters", "refs",
                  "long_fields", "audiences", "store"})
OPTIONAL_KEYS = frozenset({"search_fields", "filters", "refs", "long_fields", "store"})
RECORDS = "records"
"""The default store: ``resource_records``, written through ``PUT /records/{type}/{id}``."""
STORES: dict[str, str] = {
    RECORDS: "",
    "memories": "memories are written through POST /memory-candidates, corrected with PATCH /memories/{id} and"
                " deleted with DELETE /memories/{id}",
    "sessions": "sessions are written through POST /sessions and POST /sessions/{id}/messages and deleted with"
                " POST /deletion-requests",
    "session_summaries": "session summaries are built by POST /sessions/{id}/commit",
    "tasks": "tasks are started with POST /tasks and move through their workflow",
    "knowledge_items": "knowledge is proposed through POST /knowledge-candidates and published by a reviewer",
}
"""Where a type's records live, and for mnemo's own objects how they are written instead of ``/records``."""


@dataclass(frozen=True)
class Filter:
    name: str
    path: str
    type: FilterType


@dataclass(frozen=True, eq=False)
class Declaration:
    """Compared by identity: the catalog holds one per type, and its compiled validator is cached by it."""

    type: str
    description: str
    title: str
    """The field a search result shows as its title."""
    operations: frozenset[Operation]
    schema: dict[str, Any]
    """As declared, with each ref field's pattern added (``^episode:<id>\\Z``): what a record is validated by."""
    search_fields: tuple[str, ...]
    """The string fields the search projection holds, each apart (a field whitelist picks among them)."""
    filters: dict[str, Filter]
    refs: dict[str, str]
    """Field path → the type its refs name (``/episode`` → ``episode``): references are explicit, never inferred."""
    long_fields: tuple[str, ...]
    """Fields whose value goes to the artifact store when long (a transcript's text)."""
    ceilings: dict[Audience, tuple[str, ...]]
    """Per audience that may see the type, the fields it may ever read (a run's policy narrows them)."""
    source: str
    store: str = RECORDS
    """Where its records live (:data:`STORES`): ``records``, or one of mnemo's own tables read by an adapter."""


def parse_declaration(raw: Any, source: str) -> Declaration:
    """Check ``raw`` (one parsed JSON document) and build its declaration, or raise :class:`DeclarationError`."""
    name = raw.get("type") if isinstance(raw, dict) else None
    label = f"resource declaration {name!r} ({source})" if isinstance(name, str) else f"resource declaration {source}"
    try:
        return _build(raw, source)
    except (DeclarationError, PointerError) as exc:
        raise DeclarationError(f"{label}: {exc}") from exc


def _build(raw: Any, source: str) -> Declaration:
    if not isinstance(raw, dict):
        raise DeclarationError("a declaration is a JSON object")
    unknown, missing = sorted(raw.keys() - KEYS), sorted(KEYS - OPTIONAL_KEYS - raw.keys())
    if unknown or missing:
        raise DeclarationError(f"unknown keys {unknown}, missing keys {missing}")
    if not isinstance(raw["type"], str) or not TYPE_NAME.fullmatch(raw["type"]):
        raise DeclarationError("type must be 1-63 lowercase letters, digits or '_', starting with a letter")
    if not isinstance(raw["description"], str) or not raw["description"].strip():
        raise DeclarationError("description must be a non-empty string")
    schema = _schema(raw["schema"])
    operations = _operations(raw["operations"])
    _string_field(schema, raw["title"], "title")
    search_fields = _paths(raw.get("search_fields", []), "search_fields")
    for path in search_fields:
        _string_field(schema, path, "search field")
    if (Operation.SEARCH in operations) != bool(search_fields):
        raise DeclarationError("the search operation needs search_fields, and search_fields need the search operation")
    refs = _refs(schema, raw.get("refs", {}))
    store = raw.get("store", RECORDS)
    if not isinstance(store, str) or store not in STORES:
        raise DeclarationError(f"store {store!r} is none of {sorted(STORES)}")
    long_fields = _paths(raw.get("long_fields", []), "long_fields")
    if long_fields and store != RECORDS:
        raise DeclarationError("long_fields live in the record store: a type of another store declares none")
    for path in long_fields:
        if pointers.WILDCARD in pointers.parse(path):
            raise DeclarationError(f"long field {path!r}: a long field is one value, so its path has no '*'")
        pointers.schema_at(schema, path)
    return Declaration(
        type=raw["type"],
        description=raw["description"],
        title=raw["title"],
        operations=operations,
        schema=_with_ref_patterns(schema, refs),
        search_fields=search_fields,
        filters=_filters(schema, raw.get("filters", {}), refs),
        refs=refs,
        long_fields=long_fields,
        ceilings=_ceilings(schema, raw["audiences"], raw["title"]),
        source=source,
        store=store,
    )


def _schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise DeclarationError("schema must be a JSON Schema of type object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path)
        raise DeclarationError(f"schema is not a valid JSON Schema at /{where}: {exc.message}") from exc
    _check_closed(schema, "")
    return schema


def _check_closed(node: dict[str, Any], at: str) -> None:
    """Every node has one non-null type and every object refuses unknown keys, so a record is exactly its schema."""
    kind = node.get("type")
    if not isinstance(kind, str) or kind == "null":
        raise DeclarationError(f"schema at {at or '/'}: give one type, not {kind!r} (null is never a value)")
    if kind == "object":
        if node.get("additionalProperties") is not False:
            raise DeclarationError(f"schema at {at or '/'}: an object must set additionalProperties to false")
        for name, child in node.get("properties", {}).items():
            _check_closed(child, f"{at}/{pointers.escape(name)}")
    elif kind == "array":
        items = node.get("items")
        if not isinstance(items, dict):
            raise DeclarationError(f"schema at {at or '/'}: an array must declare the schema of its items")
        _check_closed(items, f"{at}/*")


def _operations(raw: Any) -> frozenset[Operation]:
    known = {operation.value for operation in Operation}
    if not isinstance(raw, list) or not raw or len(set(raw)) != len(raw) or not set(raw) <= known:
        raise DeclarationError(f"operations must be distinct names among {sorted(known)}, at least one")
    return frozenset(Operation(name) for name in raw)


def _paths(raw: Any, what: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(path, str) for path in raw) or len(set(raw)) != len(raw):
        raise DeclarationError(f"{what} must be a list of distinct field paths")
    for path in raw:
        pointers.parse(path)
    return tuple(raw)


def _string_field(schema: dict[str, Any], path: Any, what: str) -> dict[str, Any]:
    if not isinstance(path, str):
        raise DeclarationError(f"{what} must be a field path")
    node = pointers.schema_at(schema, path)
    if node.get("type") != "string":
        raise DeclarationError(f"{what} {path!r} must be a string field, not {node.get('type')!r}")
    return node


def _refs(schema: dict[str, Any], raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise DeclarationError("refs must map field paths to resource types")
    for path, target in raw.items():
        node = _string_field(schema, path, "ref field")
        if not isinstance(target, str) or not TYPE_NAME.fullmatch(target):
            raise DeclarationError(f"ref field {path!r} must name a resource type, not {target!r}")
        if {"pattern", "format", "enum"} & node.keys():
            raise DeclarationError(f"ref field {path!r}: its pattern comes from the ref, declare none")
    return dict(raw)


def _with_ref_patterns(schema: dict[str, Any], refs: dict[str, str]) -> dict[str, Any]:
    compiled = copy.deepcopy(schema)
    for path, target in refs.items():
        # \Z, not $: jsonschema searches with Python's re, where $ also matches before a final newline.
        pointers.schema_at(compiled, path)["pattern"] = rf"^{target}:{RECORD_ID}\Z"
    return compiled


def _filters(schema: dict[str, Any], raw: Any, refs: dict[str, str]) -> dict[str, Filter]:
    if not isinstance(raw, dict):
        raise DeclarationError("filters must map filter names to {path, type}")
    filters: dict[str, Filter] = {}
    for name, spec in raw.items():
        if not FILTER_NAME.fullmatch(name) or name in RESERVED_FILTERS:
            raise DeclarationError(f"filter {name!r}: a name is lowercase letters, digits, '_', and not 'cursor'")
        if not isinstance(spec, dict) or spec.keys() != {"path", "type"}:
            raise DeclarationError(f"filter {name!r} must be exactly {{\"path\", \"type\"}}")
        known = {kind.value for kind in FilterType}
        if spec["type"] not in known:
            raise DeclarationError(f"filter {name!r}: type {spec['type']!r} is none of {sorted(known)}")
        kind, path = FilterType(spec["type"]), spec["path"]
        try:
            node = pointers.schema_at(schema, path)
        except PointerError as exc:
            raise DeclarationError(f"filter {name!r} is on an unknown field: {exc}") from exc
        if not _filterable(kind, node, path in refs):
            raise DeclarationError(f"filter {name!r} of type {kind.value} cannot compare field {path!r} ({node})")
        filters[name] = Filter(name, path, kind)
    return filters


def _filterable(kind: FilterType, node: dict[str, Any], is_ref: bool) -> bool:
    schema_type, is_timestamp = node.get("type"), node.get("format") == "date-time"
    if kind is FilterType.REF:
        return is_ref
    if kind is FilterType.TIMESTAMP:
        return schema_type == "string" and is_timestamp
    if kind is FilterType.STRING:
        return schema_type == "string" and not is_timestamp and not is_ref
    return schema_type == kind.value


def _ceilings(schema: dict[str, Any], raw: Any, title: str) -> dict[Audience, tuple[str, ...]]:
    known = {audience.value for audience in Audience}
    if not isinstance(raw, dict) or not raw or not raw.keys() <= known:
        raise DeclarationError(f"audiences must map some of {sorted(known)} to the fields each may read")
    ceilings: dict[Audience, tuple[str, ...]] = {}
    for name, paths in raw.items():
        fields = _paths(paths, f"audience {name!r}")
        if not fields:
            raise DeclarationError(f"audience {name!r} may read no field: leave the audience out instead")
        for path in fields:
            try:
                pointers.schema_at(schema, path)
            except PointerError as exc:
                raise DeclarationError(f"audience {name!r} may read an unknown field: {exc}") from exc
        if not any(pointers.covers(path, title) for path in fields):
            raise DeclarationError(f"audience {name!r} may not read the title field {title!r}")
        ceilings[Audience(name)] = fields
    return ceilings
