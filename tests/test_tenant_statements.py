"""Every statement the store sends constrains the tenant on every tenant table it reads or writes: what a Citus
cluster distributed by ``tenant_id`` needs to send a statement to one node (memory/distribution.py).

A representative workload runs through the real API and a real worker — memory writes and a correction, recall,
a session's messages and commit, a deletion, a report task to its publication — while a SQLAlchemy event captures
each statement with its parameters. Each is then planned (``EXPLAIN (VERBOSE)``, as a superuser, so that row-level
security adds nothing of its own) with those parameters: every scan of a tenant table must carry a condition
``tenant_id = '<a tenant>'`` (PostgreSQL carries a tenant constant across joins on ``tenant_id``, as Citus does),
and every INSERT into one must name ``tenant_id``; anything else found is a failure naming the statement and the
table. The statements that read across tenants on purpose — the outbox drain, the metrics scrape and the sweeps'
listings, each in a read-only or drain transaction that sets its own setting (``mnemo.outbox_drain``,
``mnemo.metrics_scrape``, ``mnemo.sweep_listing``) — are not part of this workload, so none is exempted here.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb
from sqlalchemy import Engine, event

from api.settings import Settings
from bench.harness import libpq_url
from memory.db import make_engine, tenant_session
from memory.distribution import REFERENCE_TABLES, tenant_tables
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth, poll
from tests.tasks.conftest import SMALL_DATASET, approve, start_task, status_is, wait_for
from tests.workers import api_with_worker

TENANT_CONSTANT = re.compile(r"\btenant_id\s*=\s*'[^']*'::text|'[^']*'::text\s*=\s*(?:\w+\.)?tenant_id\b")
CONDITIONS = ("Index Cond", "Filter", "Recheck Cond", "Join Filter", "Hash Cond", "Merge Cond")
INSERT = re.compile(r"^\s*INSERT INTO (\w+)\s*\(([^)]*)\)", re.IGNORECASE)


@dataclass(frozen=True)
class Sent:
    statement: str
    parameters: Any


@pytest.fixture(scope="module")
def sent(settings: Settings, make_key: MakeKey, engine: Engine) -> Iterator[list[Sent]]:
    """The statements the API's and the worker's engines sent while the workload ran (the first parameters of
    each distinct text)."""
    worker_engine = make_engine(settings.require_database_url())
    captured: dict[str, Sent] = {}
    engines: set[Engine] = {worker_engine}

    def capture(conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool) -> None:
        if conn.engine in engines and statement not in captured:
            first = parameters[0] if many and isinstance(parameters, list | tuple) else parameters
            captured[statement] = Sent(statement, first)

    event.listen(Engine, "before_cursor_execute", capture)
    try:
        with api_with_worker(settings, worker_engine, "statements", cpu_pool_workers=0) as client:
            engines.add(client.app.state.engine)  # type: ignore[attr-defined]
            workload(client, make_key, engine)
    finally:
        event.remove(Engine, "before_cursor_execute", capture)
        worker_engine.dispose()
    yield list(captured.values())


def workload(client: Any, make_key: MakeKey, engine: Engine) -> None:
    """``engine``: the test's own (not captured), for the sales data a report reads."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant, user="alice")
    approver = make_key(tenant=tenant, user="bob", roles=("approver",))
    with tenant_session(engine, tenant) as session:
        seed_sales(session, tenant, total=SMALL_DATASET)
    source = {"source_type": "EXPLICIT_USER_STATEMENT", "captured_at": "2026-06-01T09:00:00Z"}
    event_id = client.post("/memory-events", headers=auth(key), json={
        "idempotency_key": "e1", "kind": "MESSAGE", "payload": {"role": "user", "text": "I drink tea"},
        "occurred_at": "2026-06-01T09:00:00Z", "session_id": "s0"}).json()["event_id"]
    ids = []
    for i, content in enumerate(["I drink green tea every morning", "My office is in Shanghai"]):
        answer = client.post("/memory-candidates", headers=auth(key), json={
            "category": "PREFERENCE", "space": "USER", "content": content, "source_level": "E2",
            "source": {**source, "source_id": event_id}, "idempotency_key": f"m{i}"})
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["memory_id"])
    corrected = client.patch(f"/memories/{ids[0]}", headers=auth(key),
                             json={"expected_version": 1, "content": "I drink black tea every morning"})
    assert corrected.status_code == 200, corrected.text
    assert client.post("/memory-query", headers=auth(key), json={"query": "what tea do I drink"}).status_code == 200
    assert client.get(f"/memories/{ids[1]}", headers=auth(key)).status_code == 200
    client.post("/sessions", headers=auth(key), json={"session_id": "s1"})
    messages = [{"idempotency_key": f"s1-{i}", "role": role, "content": text, "created_at": "2026-07-14T14:00:00Z"}
                for i, (role, text) in enumerate([("user", "I moved to Hangzhou last week"), ("assistant", "Noted")])]
    assert client.post("/sessions/s1/messages", headers=auth(key), json={"messages": messages}).status_code == 201
    assert client.post("/sessions/s1/commit", headers=auth(key), json={"commit_id": "c1"}).status_code == 202
    poll(client, key, "/sessions/s1/commits/c1", lambda body: body["status"].startswith("completed"), 60)
    job = client.delete(f"/memories/{ids[1]}", headers=auth(key)).json()["job_id"]
    poll(client, key, f"/memory-deletions/{job}", lambda body: body["status"] == "completed", 60)
    task = start_task(client, key)["task_id"]
    view = wait_for(client, key, task, status_is("WAITING_FOR_APPROVAL"))
    assert approve(client, approver, view).status_code == 200
    wait_for(client, key, task, status_is("SUCCEEDED"))


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _conditions(node: dict[str, Any]) -> str:
    """A scan's conditions, with those of the bitmap index scans under a bitmap heap scan."""
    parts = [str(node.get(name, "")) for name in CONDITIONS]
    if node.get("Node Type") == "Bitmap Heap Scan":
        parts += [str(child.get("Index Cond", "")) for child in _nodes(node) if child is not node]
    return " ".join(parts)


def _bind(parameters: Any) -> Any:
    """The parameters as psycopg binds them on its own connection (a JSON value the dialect wrapped stays so)."""
    if isinstance(parameters, dict):
        return {name: Jsonb(value.obj) if hasattr(value, "obj") else value for name, value in parameters.items()}
    return parameters


def unconstrained(conninfo: str, sent: list[Sent], tenant: set[str]) -> tuple[list[str], int]:
    """Every (statement, tenant table) whose scan or INSERT does not constrain the tenant; how many tenant-table
    statements were checked."""
    problems, checked = [], 0
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for item in sent:
            head = item.statement.lstrip().split(None, 1)[0].upper()
            if head not in ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"):
                continue
            plan = conn.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + item.statement, _bind(item.parameters)
                                ).fetchone()[0][0]["Plan"]  # type: ignore[index]
            touched = False
            for node in _nodes(plan):
                table = node.get("Relation Name")
                if table not in tenant:
                    continue
                touched = True
                if node.get("Node Type") == "ModifyTable":
                    insert = INSERT.match(item.statement)
                    if node.get("Operation") == "Insert" and (insert is None or "tenant_id" not in insert.group(2)):
                        problems.append(f"{table} (INSERT without tenant_id): {item.statement}")
                elif not TENANT_CONSTANT.search(_conditions(node)):
                    problems.append(f"{table} ({node['Node Type']}): {item.statement}")
            checked += touched
    return problems, checked


def test_every_statement_of_the_workload_constrains_the_tenant(sent: list[Sent], settings: Settings) -> None:
    conninfo = libpq_url(settings.require_database_url())
    engine = make_engine(settings.require_database_url())
    try:
        with engine.connect() as connection:
            tenant = tenant_tables(connection)
    finally:
        engine.dispose()
    text = " ".join(item.statement for item in sent)
    exercised = {table for table in tenant if re.search(rf"\b{table}\b", text)}
    assert {"memories", "memory_search", "memory_lexemes", "memory_events", "sessions", "session_commits",
            "deletion_jobs", "tombstones", "tasks", "task_steps", "task_approvals", "audit_log"} <= exercised
    problems, checked = unconstrained(conninfo, sent, tenant)
    assert checked > 100
    assert problems == [], "\n\n".join(problems)


def test_the_check_finds_a_statement_without_the_tenant(settings: Settings) -> None:
    """The same check refuses a recall-like read by memory id alone, and a join whose second table is free."""
    conninfo = libpq_url(settings.require_database_url())
    tenant = {"memories", "memory_search"}
    by_id = Sent("SELECT content FROM memories WHERE memory_id = %(m)s", {"m": uuid.uuid4()})
    join = Sent("SELECT m.content FROM memories m JOIN memory_search s ON s.memory_id = m.memory_id "
                "WHERE m.tenant_id = %(t)s", {"t": "t-x"})
    insert = Sent("INSERT INTO memory_usage (memory_id) VALUES (%(m)s)", {"m": uuid.uuid4()})
    fine = Sent("SELECT m.content FROM memories m JOIN memory_search s USING (tenant_id, memory_id) "
                "WHERE m.tenant_id = %(t)s", {"t": "t-x"})
    problems, checked = unconstrained(conninfo, [by_id, join, insert, fine], tenant | {"memory_usage"})
    assert checked == 4
    assert [p.split(" (")[0] for p in problems] == ["memories", "memory_search", "memory_usage"], problems
    assert set(REFERENCE_TABLES) & tenant == set()
