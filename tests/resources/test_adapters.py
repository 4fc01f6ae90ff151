"""mnemo's own memories, sessions, session summaries and tasks as resource types (issue 15 item 1).

Everything is written through the real API (memories, sessions and their messages, tasks run by a real
worker on the Temporal dev server) or, for a session summary, through the domain function a commit uses
(:func:`memory.sessions.archive.store_summary`), and read back through the reader's routes; the field
whitelist is checked at the source with grants narrower than the ceiling (no policy can narrow one yet).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from memory.db import global_session, tenant_session
from memory.identity.auth import PrincipalContext, authenticate
from memory.reports.sales import seed_sales
from memory.resources.access import Access, Grant
from memory.resources.adapters import ADAPTERS
from memory.resources.catalog import load_catalog
from memory.resources.declarations import Audience, DeclarationError, Operation, parse_declaration
from memory.resources.runs import resolve_access
from memory.resources.sources import FilterClause, FilterOp, Position, Query, RowState, Source
from memory.sessions.archive import store_summary
from memory.sessions.store import get_session
from memory.text import normalize, search_terms
from tests.conftest import MakeKey, auth
from tests.tasks.conftest import (
    SMALL_DATASET,
    approve,
    start_task,
    status_is,
    task_worker,  # noqa: F401 - the real worker, a fixture the task test uses by name
    wait_for,
)

CATALOG = load_catalog()
OWN_TYPES = ("memory", "session", "session_summary", "task", "knowledge")
CAPTURED = "2026-06-01T09:00:00Z"


def remember(client: TestClient, api_key: str, content: str, **extra: Any) -> str:
    body = {"category": "PROFILE", "space": "USER", "content": content, "source_level": "E2",
            "source": {"source_id": f"chat-{uuid.uuid4().hex[:6]}", "source_type": "EXPLICIT_USER_STATEMENT",
                       "captured_at": CAPTURED}, **extra}
    answer = client.post("/memory-candidates", json=body, headers=auth(api_key))
    assert answer.status_code == 201, answer.text
    return str(answer.json()["memory_id"])


def listed(client: TestClient, key: str, resource: str, **filters: str) -> list[dict[str, Any]]:
    answer = client.get(f"/resources/{resource}", params=filters, headers=auth(key))
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def found(client: TestClient, key: str, query: str, resource: str | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"query": query} if resource is None else {"query": query, "resource": resource}
    answer = client.post("/resources/search", json=body, headers=auth(key))
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def read(client: TestClient, key: str, ref: str) -> Any:
    return client.post("/resources/read", json={"ref": ref}, headers=auth(key))


def refs(items: list[dict[str, Any]]) -> set[str]:
    return {item["ref"] for item in items}


def principal_of(engine: Engine, key: str) -> PrincipalContext:
    with global_session(engine) as session:
        return authenticate(session, key)


def access_of(engine: Engine, principal: PrincipalContext, **fields: tuple[str, ...]) -> Access:
    """The principal's ceiling access, with the given types narrowed to ``fields`` (as a policy would)."""
    with tenant_session(engine, principal.tenant_id) as session:
        access = resolve_access(session, principal, CATALOG, run_id=None, thread_id=None)
    grants = dict(access.grants)
    for resource, paths in fields.items():
        grants[resource] = Grant(resource, frozenset(Operation), tuple(sorted(paths)))
    return Access(access.principal, access.audience, access.agent_id, access.run_id, grants)


def source(resource: str) -> Source:
    declaration = CATALOG.get(resource)
    return ADAPTERS[declaration.store](declaration)


def query(text: str) -> Query:
    return Query(normalize(text), tuple(search_terms(text)))


# --- declarations and /records ------------------------------------------------------------------------------


def test_own_types_are_declared_internal_only_with_a_store_of_their_own() -> None:
    for resource in OWN_TYPES:
        declaration = CATALOG.get(resource)
        assert declaration.store != "records" and declaration.store in ADAPTERS
        assert set(declaration.ceilings) == {Audience.INTERNAL}
    assert {d.store for d in CATALOG.declarations.values() if d.type not in OWN_TYPES} == {"records"}


def test_a_declaration_naming_an_unknown_store_or_long_fields_outside_records_is_refused() -> None:
    raw = {"type": "note", "description": "a note", "title": "/title", "operations": ["list"],
           "schema": {"type": "object", "additionalProperties": False, "properties": {"title": {"type": "string"}}},
           "audiences": {"internal": ["/title"]}}
    assert parse_declaration(raw, "note.json").store == "records"
    with pytest.raises(DeclarationError, match="store 'elsewhere' is none of"):
        parse_declaration({**raw, "store": "elsewhere"}, "note.json")
    with pytest.raises(DeclarationError, match="long_fields live in the record store"):
        parse_declaration({**raw, "store": "memories", "long_fields": ["/title"]}, "note.json")


def test_records_refuse_the_types_of_other_stores(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    for method, resource in (("PUT", "memory"), ("GET", "session"), ("DELETE", "task"), ("PUT", "session_summary")):
        answer = client.request(method, f"/records/{resource}/x-1", headers=auth(key),
                                json={"data": {"title": "x"}} if method == "PUT" else None)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "not_a_record_type"
    answer = client.put("/records/memory/x-1", json={"data": {"title": "x"}}, headers=auth(key))
    assert "POST /memory-candidates" in answer.json()["error"]["message"]


# --- memories ---------------------------------------------------------------------------------------------


def test_memories_list_search_and_read_the_current_version_only(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    kept = remember(client, key, "I live in Shanghai near the Bund", key="home_city")
    corrected = client.patch(f"/memories/{kept}", json={"expected_version": 1, "content": "I moved to Hangzhou"},
                             headers=auth(key))
    assert corrected.status_code == 200, corrected.text
    gone = remember(client, key, "My locker code is quartzite")
    assert client.delete(f"/memories/{gone}", headers=auth(key)).status_code == 202

    items = listed(client, key, "memory")
    assert refs(items) == {f"memory:{kept}"}
    assert items[0]["version"] == 2 and items[0]["data"]["content"] == "I moved to Hangzhou"
    assert items[0]["data"]["supersedes_version"] == 1 and items[0]["data"]["key"] == "home_city"

    assert refs(found(client, key, "Hangzhou")) == {f"memory:{kept}"}
    assert refs(found(client, key, "Shanghai Bund", "memory")) == set()  # only the superseded version said it
    assert refs(found(client, key, "quartzite")) == set()

    page = read(client, key, f"memory:{kept}")
    assert page.status_code == 200, page.text
    assert page.json()["complete"] and page.json()["data"]["version"] == 2
    deleted, missing = read(client, key, f"memory:{gone}"), read(client, key, f"memory:{uuid.uuid4()}")
    assert deleted.status_code == missing.status_code == 404
    assert deleted.json()["error"]["code"] == missing.json()["error"]["code"]


def test_memory_filters_and_keyset_pages(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    key = make_key()
    profile = remember(client, key, "I am a night owl")
    preference = remember(client, key, "I prefer tea over coffee", category="PREFERENCE")
    third = remember(client, key, "I have a cat named Miso")
    assert refs(listed(client, key, "memory", category="PREFERENCE")) == {f"memory:{preference}"}

    principal = principal_of(engine, key)
    access = access_of(engine, principal)
    memories = source("memory")
    grant = access.grant("memory", Operation.LIST)
    with tenant_session(engine, principal.tenant_id) as session:
        first = memories.page(session, access, grant, [], None, 2)
        last = first[-1]
        rest = memories.page(session, access, grant, [], Position(last.updated_at, last.record_id), 2)
        since = memories.page(session, access, grant,
                              [FilterClause(CATALOG.get("memory").filters["stored_at"], FilterOp.FROM,
                                            datetime.now(UTC) + timedelta(days=1))], None, 10)
    assert len(first) == 2 and len(rest) == 1
    assert {row.record_id for row in first + rest} == {profile, preference, third}
    assert [row.updated_at for row in first + rest] == sorted((row.updated_at for row in first + rest), reverse=True)
    assert since == []


def test_a_word_only_in_an_unreadable_memory_field_makes_no_candidate(
    client: TestClient, make_key: MakeKey, engine: Engine,
) -> None:
    key = make_key()
    memory_id = remember(client, key, "The gate code is obsidian-7, ask Wen", abstract="How to get in at the gate")
    principal = principal_of(engine, key)
    memories = source("memory")
    narrow = access_of(engine, principal, memory=("/abstract", "/category", "/status"))
    wide = access_of(engine, principal)
    with tenant_session(engine, principal.tenant_id) as session:
        hidden = memories.match(session, narrow, narrow.grants["memory"], query("obsidian"), 10)
        seen = memories.match(session, wide, wide.grants["memory"], query("obsidian"), 10)
        title = memories.match(session, narrow, narrow.grants["memory"], query("gate obsidian"), 10)
        row = memories.fetch(session, wide, wide.grants["memory"], [memory_id, "not-a-uuid"])
    assert hidden == []
    assert [(c.record_id, c.fields) for c in seen] == [(memory_id, ("/content",))]
    assert [(c.record_id, c.fields, c.coverage) for c in title] == [(memory_id, ("/abstract",), 0.5)]
    assert 0 < seen[0].rank < 1
    assert list(row) == [memory_id] and row[memory_id].confidence == pytest.approx(0.9)
    assert row[memory_id].state is RowState.NONE


def test_an_expired_memory_is_listed_as_history(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    key = make_key()
    memory_id = remember(client, key, "I am training for the Berlin marathon")
    assert client.post(f"/memories/{memory_id}/expire", headers=auth(key)).status_code == 200
    assert [item["data"]["status"] for item in listed(client, key, "memory")] == ["EXPIRED"]
    principal = principal_of(engine, key)
    access = access_of(engine, principal)
    with tenant_session(engine, principal.tenant_id) as session:
        rows = source("memory").fetch(session, access, access.grants["memory"], [memory_id])
    assert rows[memory_id].state is RowState.CLOSED


# --- sessions and their summaries ---------------------------------------------------------------------------


def open_session(client: TestClient, key: str, session_id: str, *contents: tuple[str, str], **extra: Any) -> None:
    assert client.post("/sessions", json={"session_id": session_id, **extra}, headers=auth(key)).status_code == 201
    messages = [{"idempotency_key": f"{session_id}-{n}", "role": role, "content": content,
                 "created_at": "2026-07-14T14:00:00+08:00"} for n, (role, content) in enumerate(contents)]
    answer = client.post(f"/sessions/{session_id}/messages", json={"messages": messages}, headers=auth(key))
    assert answer.status_code == 201, answer.text


def summarise(engine: Engine, key: str, session_id: str) -> int:
    """Build the session's next summary version as a commit does; its version."""
    principal = principal_of(engine, key)
    with tenant_session(engine, principal.tenant_id) as session:
        chat = get_session(session, principal, session_id)
        summary = store_summary(session, chat, chat.next_sequence - 1, commit_id=None, reason="commit",
                                observation=None)
        assert summary is not None
        return summary.version


def test_sessions_and_their_latest_summary(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    key = make_key()
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    open_session(client, key, session_id, ("user", "I want to plan the Lisbon offsite for March\nwith details"),
                 ("assistant", "Sure, let us plan it."))
    task_ref = f"task:{uuid.uuid4()}"
    open_session(client, key, "s-titled", ("user", "hello"), title="Budget review", task_id=task_ref[5:])

    sessions = {item["ref"]: item for item in listed(client, key, "session")}
    assert set(sessions) == {f"session:{session_id}", "session:s-titled"}
    untitled = sessions[f"session:{session_id}"]
    assert untitled["title"] == "I want to plan the Lisbon offsite for March"
    assert untitled["data"]["message_count"] == 2 and "summary" not in untitled["data"]
    assert sessions["session:s-titled"]["title"] == "Budget review"
    assert sessions["session:s-titled"]["data"]["task"] == task_ref
    assert refs(listed(client, key, "session", task=task_ref)) == {"session:s-titled"}
    assert refs(found(client, key, "Lisbon offsite", "session")) == {f"session:{session_id}"}
    assert listed(client, key, "session_summary") == []

    assert summarise(engine, key, session_id) == 1
    summary_ref = f"session_summary:{session_id}"
    active = {item["ref"]: item["data"] for item in listed(client, key, "session", status="active")}
    assert active[f"session:{session_id}"]["summary"] == summary_ref and "summary" not in active["session:s-titled"]
    page = read(client, key, summary_ref)
    assert page.status_code == 200, page.text
    data = page.json()["data"]
    assert data["session"] == f"session:{session_id}" and data["version"] == 1
    assert data["covered"] == {"from_sequence": 1, "to_sequence": 2}
    assert any("Lisbon" in item["text"] for item in data["goal"])
    assert all(item["source_event_ids"] for item in data["goal"])
    assert summary_ref in refs(found(client, key, "Lisbon offsite"))

    more = [{"idempotency_key": f"{session_id}-later", "role": "user", "content": "Also book the Porto train",
             "created_at": "2026-07-14T15:00:00+08:00"}]
    answer = client.post(f"/sessions/{session_id}/messages", json={"messages": more}, headers=auth(key))
    assert answer.status_code == 201, answer.text
    assert summarise(engine, key, session_id) == 2
    assert read(client, key, summary_ref).json()["data"]["version"] == 2
    assert refs(listed(client, key, "session_summary")) == {summary_ref}


def test_a_summary_field_outside_the_grant_makes_no_candidate(
    client: TestClient, make_key: MakeKey, engine: Engine,
) -> None:
    key = make_key()
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    open_session(client, key, session_id, ("user", "I need the Kraków venue booked"),
                 ("user", "The Wawel Hall holds eighty people on Friday"))
    summarise(engine, key, session_id)
    principal = principal_of(engine, key)
    only_goal = access_of(engine, principal, session_summary=("/goal", "/abstract"))
    only_facts = access_of(engine, principal, session_summary=("/facts", "/version"))
    summaries = source("session_summary")
    with tenant_session(engine, principal.tenant_id) as session:
        by_goal = summaries.match(session, only_goal, only_goal.grants["session_summary"], query("Kraków"), 5)
        by_facts = summaries.match(session, only_facts, only_facts.grants["session_summary"], query("Kraków"), 5)
    assert [(c.record_id, c.fields) for c in by_goal] == [(session_id, ("/abstract", "/goal/*/text"))]
    assert by_facts == []


# --- tasks ------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("task_worker")
def test_tasks_from_waiting_to_published(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    owner = make_key(tenant=tenant, user="alice")
    approver = make_key(tenant=tenant, user="bob", roles=("approver",))
    other = make_key(tenant=tenant, user="carol")
    with tenant_session(engine, tenant) as session:
        seed_sales(session, tenant, total=SMALL_DATASET)
    task_id = start_task(client, owner)["task_id"]
    waiting = wait_for(client, owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    ref = f"task:{task_id}"

    item = next(item for item in listed(client, owner, "task") if item["ref"] == ref)
    assert item["title"] == "monthly-report (currency CNY, month 2026-06)"
    assert item["data"]["status"] == "WAITING_FOR_APPROVAL" and item["data"]["waiting_reason"] == "APPROVAL"
    assert item["data"]["timeline"]["approvals"] == 1 and item["data"]["timeline"]["attempts"] >= 1
    assert refs(found(client, owner, "monthly report 2026-06", "task")) == {ref}
    assert refs(listed(client, owner, "task", status="SUCCEEDED")) == set()
    assert ref in refs(listed(client, approver, "task"))  # an approver reads every task, as GET /tasks/{id} does
    assert ref not in refs(listed(client, other, "task")) and refs(found(client, other, "monthly report")) == set()
    assert read(client, other, ref).status_code == read(client, other, f"task:{uuid.uuid4()}").status_code == 404

    principal = principal_of(engine, owner)
    access = access_of(engine, principal)
    with tenant_session(engine, tenant) as session:
        before = source("task").fetch(session, access, access.grants["task"], [task_id])[task_id]
    assert before.state is RowState.OPEN and before.version == waiting["state_version"]

    assert approve(client, approver, waiting).status_code == 200
    done = wait_for(client, owner, task_id, status_is("SUCCEEDED"))
    page = read(client, owner, ref)
    assert page.status_code == 200, page.text
    data = page.json()["data"]
    assert data["status"] == "SUCCEEDED" and data["state_version"] == done["state_version"]
    assert data["publication"]["status"] == "SUCCEEDED" and data["publication"]["destination"] == "reports"
    assert data["publication"]["publication_id"] and data["timeline"]["operations"] == 1
    with tenant_session(engine, tenant) as session:
        after = source("task").fetch(session, access, access.grants["task"], [task_id])[task_id]
    assert after.state is RowState.CLOSED


# --- who sees what ----------------------------------------------------------------------------------------


def test_another_users_memories_and_sessions_are_absent(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    bobs_memory = remember(client, bob, "Bob keeps his spare key under the heron statue")
    open_session(client, bob, "s-bob", ("user", "I want the heron statue photographed"))
    summarise(engine, bob, "s-bob")
    summarise_ref = "session_summary:s-bob"
    for resource in ("memory", "session", "session_summary"):
        assert listed(client, alice, resource) == []
    assert found(client, alice, "heron statue") == []
    for ref in (f"memory:{bobs_memory}", "session:s-bob", summarise_ref):
        foreign, missing = read(client, alice, ref), read(client, alice, ref.split(":")[0] + ":absent-1")
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["error"]["code"] == missing.json()["error"]["code"]
    assert refs(found(client, bob, "heron statue")) == {f"memory:{bobs_memory}", "session:s-bob", summarise_ref}


def test_a_public_key_sees_none_of_mnemos_own_types(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    owner = make_key(tenant=tenant, user="alice")
    public = make_key(tenant=tenant, user="alice", roles=("public_client",))
    memory_id = remember(client, owner, "I collect vintage barometers")
    directory = client.get("/resources", headers=auth(public)).json()
    assert not {entry["type"] for entry in directory["resources"]} & set(OWN_TYPES)
    for resource in OWN_TYPES:
        assert client.get(f"/resources/{resource}", headers=auth(public)).status_code == 404
    assert found(client, public, "vintage barometers") == []
    assert read(client, public, f"memory:{memory_id}").status_code == 404
    assert refs(found(client, owner, "vintage barometers")) == {f"memory:{memory_id}"}
