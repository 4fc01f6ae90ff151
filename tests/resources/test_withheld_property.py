"""The invariant of issue 23 (Deliver item 3), as a property over the real reader and PostgreSQL: for random
declarations, policies and records, two worlds whose records differ ONLY in fields the policy withholds give the
caller byte-identical list, search and read results — items, order, state, score, `omitted`, and the cursors (their
payloads: only the digest naming the tenant and user differs, since each world is a tenant of its own) — on every
page. What the caller may read it does get (so an empty answer cannot pass).

Each world is a tenant of its own holding the same record ids; records are written through the real write path
(validation, projection) — in the second world a record may have an earlier version, other in withheld fields only,
so its version counts one more write — then given the same times of change in both worlds (the two worlds are
written at different moments; that clock is no field of either). Declarations named todo, intent and calendar
have a lifecycle (their state comes from `/status`), the way the ranker sees the built-in ones.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from api.settings import Settings
from memory.db import tenant_session
from memory.enums import Category, SourceLevel, Space
from memory.identity.auth import PrincipalContext
from memory.resources import listing
from memory.resources.access import Access, Grant
from memory.resources.bodies import record_store
from memory.resources.catalog import Catalog, load_catalog
from memory.resources.declarations import Audience, Declaration, Operation, parse_declaration
from memory.resources.fields import readable
from memory.resources.reader import Reader
from memory.resources.records import save_record
from memory.resources.results import ListPage, ReadPage, SearchResult
from memory.store.memories import Correction, NewMemory, Source, correct_memory, create_memory
from tests.factories import key_in

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "报告", "会议", "预算")
STATUSES = {"todo": ("open", "done", "cancelled"), "intent": ("proposed", "confirmed", "rejected"),
            "calendar": ("confirmed", "cancelled"), "note": ("draft", "final")}
OPTIONAL = ("/status", "/notes", "/tag", "/count", "/people")
"""The fields a declaration may add to its title."""
PAGE_ITEMS = 2
"""A list page this short, so that two or three records already page through cursors."""
CHANGED = datetime(2100, 1, 1, tzinfo=UTC)
"""The records' times of change: ahead of any `now`, so recency is the same (1) whenever a search runs."""

phrase = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


@st.composite
def declarations(draw: st.DrawFn) -> tuple[Declaration, tuple[str, ...]]:
    """A declaration of random fields, search fields and name, and a policy: its title and some of the others."""
    name = draw(st.sampled_from(sorted(STATUSES)))
    fields = ("/title", *draw(st.lists(st.sampled_from(OPTIONAL), unique=True)))
    properties: dict[str, Any] = {"title": {"type": "string", "minLength": 1}}
    texts = ["/title"]
    if "/status" in fields:
        properties["status"] = {"type": "string", "enum": list(STATUSES[name])}
    for path in ("/notes", "/tag"):
        if path in fields:
            properties[path[1:]] = {"type": "string"}
            texts.append(path)
    if "/count" in fields:
        properties["count"] = {"type": "integer"}
    if "/people" in fields:
        properties["people"] = {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "role": {"type": "string"}}}}
        texts.append("/people/*/name")
    searched = ["/title", *draw(st.lists(st.sampled_from(texts[1:]), unique=True))] if len(texts) > 1 else ["/title"]
    declaration = parse_declaration({
        "type": name, "description": "a random type", "title": "/title", "operations": ["list", "search", "read"],
        "schema": {"type": "object", "additionalProperties": False, "properties": properties, "required": ["title"]},
        "search_fields": searched, "audiences": {"internal": list(fields)},
    }, "hypothesis")
    granted = ["/title"]
    for path in fields[1:]:
        choice = draw(st.sampled_from(["all", "none", "names"] if path == "/people" else ["all", "none"]))
        if choice == "all":
            granted.append(path)
        elif choice == "names":
            granted.append("/people/*/name")
    return declaration, tuple(sorted(granted))


def values(declaration: Declaration) -> st.SearchStrategy[dict[str, Any]]:
    """A record's optional values (each may be absent), for the fields the declaration has."""
    properties = declaration.schema["properties"]
    options: dict[str, st.SearchStrategy[Any]] = {}
    if "status" in properties:
        options["status"] = st.sampled_from(properties["status"]["enum"])
    for name in ("notes", "tag"):
        if name in properties:
            options[name] = phrase
    if "count" in properties:
        options["count"] = st.integers(-5, 5)
    if "people" in properties:
        options["people"] = st.lists(st.fixed_dictionaries({}, optional={"name": phrase, "role": phrase}),
                                     max_size=3)
    return st.fixed_dictionaries({}, optional=options)


def twin(first: dict[str, Any], second: dict[str, Any], granted: tuple[str, ...]) -> dict[str, Any]:
    """``second`` with every value ``granted`` reads taken from ``first``: the two differ in withheld fields only."""
    result = {key: value for key, value in second.items() if f"/{key}" not in granted}
    result.update({key: value for key, value in first.items() if f"/{key}" in granted})
    if "/people/*/name" in granted:
        roles = [item.get("role") for item in second.get("people", [])]
        if "people" in first:
            result["people"] = [
                {**({"name": item["name"]} if "name" in item else {}),
                 **({"role": roles[index]} if index < len(roles) and roles[index] is not None else {})}
                for index, item in enumerate(first["people"])]
        else:
            result.pop("people", None)
    return result


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Declaration, tuple[str, ...], list[tuple[dict[str, Any], list[dict[str, Any]]]],
                                     str]:
    declaration, granted = draw(declarations())
    records = []
    for _ in range(draw(st.integers(1, 5))):
        title = draw(phrase)
        first, second, earlier = draw(values(declaration)), draw(values(declaration)), draw(values(declaration))
        # In the second world a record may have been written before with other withheld values: its history too
        # differs in withheld fields only.
        history = [{"title": title, **twin(first, earlier, granted)}] if draw(st.booleans()) else []
        records.append(({"title": title, **first}, [*history, {"title": title, **twin(first, second, granted)}]))
    # The query: words of the titles (every record's title is readable, so the search has hits to compare) and one
    # more, which may lie in a withheld field only.
    titles = sorted({word for first, _ in records for word in first["title"].split()})
    words = draw(st.lists(st.sampled_from(titles), min_size=1, max_size=3, unique=True))
    return declaration, granted, records, " ".join([*words, draw(st.sampled_from(WORDS))])


@contextmanager
def short_pages() -> Iterator[None]:
    kept, listing.PAGE_ITEMS = listing.PAGE_ITEMS, PAGE_ITEMS
    try:
        yield
    finally:
        listing.PAGE_ITEMS = kept


def cursor_payload(cursor: str | None) -> dict[str, Any] | None:
    """What a cursor says, without the digest naming its tenant and user (each world is a tenant)."""
    if cursor is None:
        return None
    body = cursor.split(".")[1]
    payload: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload.pop("u")
    return payload


def comparable(page: ListPage | SearchResult | ReadPage) -> dict[str, Any]:
    dumped = page.model_dump(mode="json")
    if "next_cursor" in dumped:
        dumped["next_cursor"] = cursor_payload(dumped["next_cursor"])
    return dumped


def observe(reader: Reader, access: Access, declaration: Declaration, refs: list[str], query: str) -> dict[str, Any]:
    """Everything the caller gets: every list page (through its cursors), the search, and each record's read."""
    pages, cursor = [], None
    while True:
        page = reader.list(access, declaration.type, {}, cursor)
        pages.append(comparable(page))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    reads = {ref: comparable(reader.read(access, ref, None)) for ref in refs}
    return {"list": pages, "search": comparable(reader.search(access, query, None, 50)), "read": reads}


def write_world(engine: Engine, settings: Settings, declaration: Declaration, records: list[list[dict[str, Any]]]
                ) -> str:
    """A tenant holding ``records``, each written as its list of versions says (the last one stays)."""
    tenant_id = f"t-{uuid.uuid4().hex[:12]}"
    key_in(engine, tenant_id)  # the tenant and its user, as a key makes them
    owner = PrincipalContext(tenant_id, "alice", None, frozenset({"memory_writer"}), "key-alice")
    store = record_store(settings.artifact_root(engine), tenant_id)
    for index, versions in enumerate(records):
        version = None
        for data in versions:
            version = save_record(engine, owner, declaration, f"r{index}", data, version, store).record.version
    with tenant_session(engine, tenant_id) as session:
        for index in range(len(records)):  # the same times in both worlds, some shared (ties break by id)
            session.execute(
                text("UPDATE resource_records SET updated_at = :at WHERE tenant_id = :t AND record_id = :r"),
                {"at": CHANGED + timedelta(minutes=index % 3), "t": tenant_id, "r": f"r{index}"})
    return tenant_id


def run_access(tenant_id: str, declaration: Declaration, granted: tuple[str, ...]) -> Access:
    """The same agent and run in either world (so cursors bind the same caller), reading ``granted``."""
    principal = PrincipalContext(tenant_id, "alice", "agent-p", frozenset({"memory_writer"}), "key-agent-p")
    return Access(principal=principal, audience=Audience.INTERNAL, agent_id="agent-p", run_id="run-p",
                  grants={declaration.type: Grant(declaration.type, frozenset(Operation), granted)})


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(world=worlds())
def test_records_differing_only_in_withheld_fields_give_identical_results(
    world: tuple[Declaration, tuple[str, ...], list[tuple[dict[str, Any], list[dict[str, Any]]]], str],
    engine: Engine, settings: Settings,
) -> None:
    declaration, granted, records, query = world
    firsts, seconds = [first for first, _ in records], [second for _, second in records]
    tenants = [write_world(engine, settings, declaration, [[first] for first in firsts]),
               write_world(engine, settings, declaration, seconds)]
    reader = Reader.build(engine, Catalog({declaration.type: declaration}), settings.artifact_root(engine),
                          settings.cursor_signing_keys())
    refs = [f"{declaration.type}:r{index}" for index in range(len(records))]
    with short_pages():
        first, second = (observe(reader, run_access(tenant_id, declaration, granted), declaration, refs, query)
                         for tenant_id in tenants)
    assert first == second
    # Not vacuous: the caller reads exactly its readable fields, and lists every record.
    assert [first["read"][ref]["data"] for ref in refs] == [readable(data, granted) for data in firsts]
    assert sorted(item["ref"] for page in first["list"] for item in page["items"]) == sorted(refs)


MEMORY_OPTIONAL = ("/category", "/confidence", "/content", "/key", "/overview", "/project_id", "/session_id",
                   "/source", "/source_level", "/space", "/status", "/validity")
"""What a policy on ``memory`` may grant beside ``/abstract`` here: not ``/version``, ``/supersedes_version`` or
``/stored_at``, which a correction changes (the second world is the first corrected)."""
CHANGEABLE = {"/content": "content", "/overview": "overview", "/key": "key", "/confidence": "confidence"}
SOURCE = Source("conv-1", "EXPLICIT_USER_STATEMENT", datetime(2026, 6, 1, tzinfo=UTC))


def memory_values() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"content": phrase, "overview": phrase, "key": phrase,
                                  "confidence": st.sampled_from([0.1, 0.5, 0.9, 1.0])})


@st.composite
def memory_worlds(draw: st.DrawFn) -> tuple[tuple[str, ...], list[tuple[str, dict[str, Any], dict[str, Any]]], str]:
    granted = tuple(sorted(["/abstract", *draw(st.lists(st.sampled_from(MEMORY_OPTIONAL), unique=True))]))
    memories = []
    for _ in range(draw(st.integers(1, 4))):
        first, second = draw(memory_values()), draw(memory_values())
        second = {name: first[name] if path in granted else second[name] for path, name in CHANGEABLE.items()}
        memories.append((draw(phrase), first, second))
    words = sorted({word for abstract, _, _ in memories for word in abstract.split()})
    query = " ".join([*draw(st.lists(st.sampled_from(words), min_size=1, max_size=3, unique=True)),
                      draw(st.sampled_from(WORDS))])
    return granted, memories, query


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(world=memory_worlds())
def test_memories_corrected_only_in_withheld_fields_give_identical_results(
    world: tuple[tuple[str, ...], list[tuple[str, dict[str, Any], dict[str, Any]]], str],
    engine: Engine, settings: Settings,
) -> None:
    """The same over an adapter (mnemo's own memories, whose state, confidence, time and version are fields): each
    memory corrected in its withheld fields only — content, overview, key, confidence — reads the same to the
    caller before and after, though its version and time of change moved (neither is granted)."""
    granted, memories, query = world
    tenant_id = f"t-{uuid.uuid4().hex[:12]}"
    key_in(engine, tenant_id)
    owner = PrincipalContext(tenant_id, "alice", None, frozenset({"memory_writer"}), "key-alice")
    catalog = load_catalog()
    reader = Reader.build(engine, catalog, settings.artifact_root(engine), settings.cursor_signing_keys())
    access = run_access(tenant_id, catalog.get("memory"), granted)
    with tenant_session(engine, tenant_id) as session:
        ids = [create_memory(session, owner, NewMemory(
            category=Category.PROFILE, space=Space.USER, content=first["content"], source=SOURCE,
            source_level=SourceLevel.E2, abstract=abstract, overview=first["overview"], key=first["key"],
            confidence=first["confidence"])).memory.memory_id for abstract, first, _ in memories]
    refs = [f"memory:{memory_id}" for memory_id in ids]
    with short_pages():
        before = observe(reader, access, catalog.get("memory"), refs, query)
        with tenant_session(engine, tenant_id) as session:
            for memory_id, (abstract, _, second) in zip(ids, memories, strict=True):
                correct_memory(session, owner, memory_id, Correction(
                    expected_version=1, content=second["content"], abstract=abstract, overview=second["overview"],
                    key=second["key"], source=SOURCE, confidence=second["confidence"]))
        after = observe(reader, access, catalog.get("memory"), refs, query)
    assert before == after
    assert all(set(before["read"][ref]["data"]) <= {path[1:] for path in granted} for ref in refs)
    assert [before["read"][ref]["data"]["abstract"] for ref in refs] == [abstract for abstract, _, _ in memories]
