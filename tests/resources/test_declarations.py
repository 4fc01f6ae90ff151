"""Declarations are data checked at start-up: the built-in catalog, and each kind of bad declaration refused
with the type, the file and the offending path named (seed 000 §2.2)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from api.main import create_app
from api.settings import Settings
from memory.resources.catalog import BUILTIN, load_catalog
from memory.resources.declarations import Audience, DeclarationError, Operation

UNUSED_DB = "postgresql+psycopg://unused@127.0.0.1:1/unused"
NINE = {"episode", "transcript", "calendar", "todo", "contact", "voice_memo", "digest", "intent", "user_profile"}
OWN = {"memory", "session", "session_summary", "task", "knowledge"}
"""mnemo's own objects, read by adapters (memory.resources.adapters), internal only."""


def _todo() -> dict[str, Any]:
    """A declaration of a new type (``task_note``) made from the built-in todo: valid as it is."""
    raw: dict[str, Any] = json.loads((BUILTIN / "todo.json").read_text(encoding="utf-8"))
    raw["type"] = "task_note"
    return raw


def _write(directory: Path, raw: dict[str, Any], name: str = "task_note.json") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(raw), encoding="utf-8")
    return directory / name


def test_the_built_in_catalog_has_the_nine_types_and_publishes_five() -> None:
    catalog = load_catalog()
    assert set(catalog.declarations) == NINE | OWN
    public = {d.type for d in catalog.visible_to(Audience.PUBLIC)}
    assert public == {"episode", "calendar", "todo", "voice_memo", "contact"}
    assert {d.type for d in catalog.visible_to(Audience.INTERNAL)} == NINE | OWN
    todo = catalog.get("todo")
    assert "/notes" in todo.ceilings[Audience.INTERNAL] and "/notes" not in todo.ceilings[Audience.PUBLIC]
    assert catalog.get("user_profile").operations == {Operation.LIST, Operation.READ}
    assert catalog.get("transcript").long_fields == ("/text", "/segments")
    assert catalog.get("episode").refs["/participants/*/contact"] == "contact"


def test_a_valid_extra_declaration_joins_the_catalog(tmp_path: Path) -> None:
    _write(tmp_path, _todo())
    assert "task_note" in load_catalog(tmp_path).declarations


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _drop(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        node = raw
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return change


BAD: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "search field the schema lacks": (_set(("search_fields",), ["/title", "/summary"]),
                                      "'/summary': the schema has no field /summary"),
    "filter on an unknown field": (_set(("filters", "owner"), {"path": "/owner", "type": "string"}),
                                   "filter 'owner' is on an unknown field"),
    "filter of the wrong type": (_set(("filters", "title"), {"path": "/title", "type": "timestamp"}),
                                 "filter 'title' of type timestamp cannot compare field '/title'"),
    "string filter on a ref field": (_set(("filters", "episode"), {"path": "/episode", "type": "string"}),
                                     "filter 'episode' of type string cannot compare field '/episode'"),
    "ceiling field the schema lacks": (_set(("audiences", "public"), ["/title", "/secret"]),
                                       "audience 'public' may read an unknown field: '/secret'"),
    "wildcard on a non-array": (_set(("search_fields",), ["/title/*"]), "'/title/*': /title is not an array"),
    "open object": (_drop(("schema", "additionalProperties")), "schema at /: an object must set additionalProperties"),
    "nullable field": (_set(("schema", "properties", "notes", "type"), ["string", "null"]),
                       "schema at /notes: give one type"),
    "search without search fields": (_set(("search_fields",), []), "the search operation needs search_fields"),
    "unknown operation": (_set(("operations",), ["list", "write"]), "operations must be distinct names"),
    "unknown key": (_set(("ranking",), {}), "unknown keys ['ranking']"),
    "title not readable": (_set(("audiences", "public"), ["/status"]),
                           "audience 'public' may not read the title field '/title'"),
    "ref to an undeclared type": (_set(("refs", "/assignee"), "person"),
                                  "ref field '/assignee' names the undeclared type 'person'"),
    "public ref to an internal type": (
        _set(("refs", "/episode"), "transcript"),
        "audience 'public' may read ref field '/episode', but not the type 'transcript'",
    ),
    "invalid JSON Schema": (_set(("schema", "properties", "title", "minLength"), -1),
                            "schema is not a valid JSON Schema at /properties/title/minLength"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_declaration_refuses_the_start_naming_the_problem(case: str, tmp_path: Path) -> None:
    change, problem = BAD[case]
    raw = copy.deepcopy(_todo())
    change(raw)
    file = _write(tmp_path, raw)
    with pytest.raises(DeclarationError) as refused:
        create_app(Settings(database_url=UNUSED_DB, resource_declarations_dir=tmp_path))
    assert f"resource declaration 'task_note' ({file})" in str(refused.value)
    assert problem in str(refused.value)


def test_a_type_declared_twice_or_a_file_that_is_not_json_refuses_the_start(tmp_path: Path) -> None:
    raw = _todo()
    raw["type"] = "todo"
    _write(tmp_path / "twice", raw)
    with pytest.raises(DeclarationError, match="resource type 'todo' is declared twice"):
        load_catalog(tmp_path / "twice")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "x.json").write_text("{", encoding="utf-8")
    with pytest.raises(DeclarationError, match=r"x\.json: not readable JSON"):
        load_catalog(tmp_path / "broken")
    with pytest.raises(DeclarationError, match="does not exist"):
        load_catalog(tmp_path / "missing")
