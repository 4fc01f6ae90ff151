"""Runs and the access of a read (seed 000 §3.1), through ``GET /resources`` with real keys: the snapshot frozen
when the run started ∩ the agent's current policy ∩ the audience's ceiling; every refusal typed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2  # what TestClient answers with since the mcp SDK brought httpx2
import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from api.devstack.postgres import PostgresInfo
from memory.db import APP_ROLE, tenant_session
from memory.resources.run_models import ResourceRun
from tests.conftest import MakeKey, auth

TODO = {"operations": ["list", "search", "read"], "fields": ["/title", "/status", "/notes"]}
EPISODE = {"operations": ["list", "read"], "fields": ["/title", "/summary"]}


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    admin: str
    runtime: str
    """alice's runtime key (no agent bound: it runs any agent)."""


@pytest.fixture()
def tenant(client: TestClient, make_key: MakeKey) -> Tenant:
    tenant_id = f"t-{uuid.uuid4().hex[:12]}"
    found = Tenant(tenant_id, make_key(tenant=tenant_id, user="root", roles=("admin",)),
                   make_key(tenant=tenant_id, user="alice", roles=("agent_runtime",)))
    _policy(client, found, "planner", "todo", TODO)
    _policy(client, found, "planner", "episode", EPISODE)
    return found


def _policy(client: TestClient, tenant: Tenant, agent: str, resource: str, body: dict[str, Any]) -> None:
    answer = client.put(f"/policies/{agent}/{resource}", json=body, headers=auth(tenant.admin))
    assert answer.status_code == 200, answer.text


def _revoke(client: TestClient, tenant: Tenant, agent: str, resource: str) -> None:
    assert client.delete(f"/policies/{agent}/{resource}", headers=auth(tenant.admin)).status_code == 200


def _start(client: TestClient, key: str, agent: str = "planner", thread: str = "th-1") -> dict[str, Any]:
    answer = client.post("/runs", json={"thread_id": thread, "agent_id": agent}, headers=auth(key))
    assert answer.status_code == 201, answer.text
    started: dict[str, Any] = answer.json()
    return started


def _directory(client: TestClient, key: str, run: str | None = None, **headers: str) -> Any:
    sent = {**auth(key), **({"X-Mnemo-Run": run} if run is not None else {}), **headers}
    return client.get("/resources", headers=sent)


def _grants(client: TestClient, key: str, run: str | None = None) -> dict[str, tuple[list[str], list[str]]]:
    answer = _directory(client, key, run)
    assert answer.status_code == 200, answer.text
    return {entry["type"]: (entry["operations"], entry["fields"]) for entry in answer.json()["resources"]}


def _refusal(answer: httpx2.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


def test_the_runtime_registers_a_run_whose_snapshot_is_the_policy_within_the_ceiling(
    client: TestClient, tenant: Tenant, make_key: MakeKey
) -> None:
    run = _start(client, tenant.runtime)
    assert uuid.UUID(run["run_id"]) and run["user_id"] == "alice" and run["agent_id"] == "planner"
    assert run["thread_id"] == "th-1" and run["ended_at"] is None
    assert run["snapshot"] == [
        {"resource": "episode", "operations": ["list", "read"], "fields": ["/summary", "/title"]},
        {"resource": "todo", "operations": ["list", "read", "search"], "fields": ["/notes", "/status", "/title"]},
    ]
    assert client.get(f"/runs/{run['run_id']}", headers=auth(tenant.runtime)).json() == run
    directory = _directory(client, tenant.runtime, run["run_id"]).json()
    assert directory["run_id"] == run["run_id"] and directory["audience"] == "internal"
    assert [entry["type"] for entry in directory["resources"]] == ["episode", "todo"]
    assert directory["resources"][1]["description"].startswith("A task to do")
    # A public runtime registers no run (a public_client key reads the public catalog only), but a public key of the
    # run's user reading in it is narrowed by the public ceiling (no /notes, no /summary beyond it).
    public = make_key(tenant=tenant.tenant_id, user="alice", roles=("agent_runtime", "public_client"))
    refused = client.post("/runs", json={"thread_id": "th-1", "agent_id": "planner"}, headers=auth(public))
    assert _refusal(refused) == (403, "forbidden")
    read_by_public = _directory(client, make_key(tenant=tenant.tenant_id, user="alice", roles=("public_client",)),
                                run["run_id"]).json()
    assert read_by_public["audience"] == "public"
    assert {g["type"]: g["fields"] for g in read_by_public["resources"]} == {"episode": ["/summary", "/title"],
                                                                          "todo": ["/status", "/title"]}


def test_only_a_runtime_key_registers_a_run_and_only_for_its_own_agent(
    client: TestClient, tenant: Tenant, make_key: MakeKey, engine: Engine
) -> None:
    for roles in [(), ("memory_writer",), ("operator",), ("public_client",)]:
        key = make_key(tenant=tenant.tenant_id, user="alice", roles=roles)
        refused = client.post("/runs", json={"thread_id": "th-1", "agent_id": "planner"}, headers=auth(key))
        assert _refusal(refused) == (403, "forbidden"), roles
    bound = make_key(tenant=tenant.tenant_id, user="alice", roles=("agent_runtime",), agent="writer")
    other = client.post("/runs", json={"thread_id": "th-1", "agent_id": "planner"}, headers=auth(bound))
    assert _refusal(other) == (403, "agent_mismatch")
    assert _start(client, bound, agent="writer")["snapshot"] == []  # no policy for writer: a run that reads nothing
    claimed = client.post("/runs", json={"thread_id": "th-1", "agent_id": "planner", "user_id": "bob"},
                          headers=auth(tenant.runtime))
    assert _refusal(claimed) == (422, "identity_from_credentials")
    bad = client.post("/runs", json={"thread_id": "th 1", "agent_id": "planner"}, headers=auth(tenant.runtime))
    assert _refusal(bad) == (422, "invalid_value")
    with tenant_session(engine, tenant.tenant_id) as session:
        assert session.execute(select(func.count()).select_from(ResourceRun)).scalar_one() == 1


def test_a_runtime_key_must_name_a_run(client: TestClient, tenant: Tenant) -> None:
    assert _refusal(_directory(client, tenant.runtime)) == (403, "run_required")
    # An admin holds every role but is a person: it reads without a run.
    assert _directory(client, tenant.admin).status_code == 200


def test_the_snapshot_wins_over_a_wider_policy_and_a_revocation_applies_to_the_next_read(
    client: TestClient, tenant: Tenant
) -> None:
    run = _start(client, tenant.runtime)["run_id"]
    before = _grants(client, tenant.runtime, run)
    assert before == {"episode": (["list", "read"], ["/summary", "/title"]),
                      "todo": (["list", "search", "read"], ["/notes", "/status", "/title"])}
    # Widened after the run started: the run does not gain, a new run does.
    _policy(client, tenant, "planner", "todo", {"operations": ["list", "search", "read"],
                                                  "fields": ["/title", "/status", "/notes", "/due_at"]})
    _policy(client, tenant, "planner", "calendar", {"operations": ["read"], "fields": ["/title"]})
    assert _grants(client, tenant.runtime, run) == before
    fresh = _start(client, tenant.runtime)["run_id"]
    assert _grants(client, tenant.runtime, fresh)["todo"][1] == ["/due_at", "/notes", "/status", "/title"]
    assert "calendar" in _grants(client, tenant.runtime, fresh)
    # Narrowed: fields shrink and an operation goes, at the very next read.
    _policy(client, tenant, "planner", "todo", {"operations": ["list", "read"], "fields": ["/title", "/status"]})
    assert _grants(client, tenant.runtime, run)["todo"] == (["list", "read"], ["/status", "/title"])
    # Revoked: the type disappears from the directory.
    _revoke(client, tenant, "planner", "episode")
    assert set(_grants(client, tenant.runtime, run)) == {"todo"}
    _revoke(client, tenant, "planner", "todo")
    assert _grants(client, tenant.runtime, run) == {}
    # Granting it back does not bring back more than the snapshot held.
    _policy(client, tenant, "planner", "todo", {"operations": ["read"], "fields": ["/title", "/due_at"]})
    assert _grants(client, tenant.runtime, run) == {"todo": (["read"], ["/title"])}


def test_an_ended_run_is_refused(client: TestClient, tenant: Tenant, make_key: MakeKey) -> None:
    run = _start(client, tenant.runtime)["run_id"]
    assert _directory(client, tenant.runtime, run).status_code == 200
    reader = make_key(tenant=tenant.tenant_id, user="alice", roles=("memory_writer",))
    assert _refusal(client.post(f"/runs/{run}/end", headers=auth(reader))) == (403, "forbidden")
    ended = client.post(f"/runs/{run}/end", headers=auth(tenant.runtime))
    assert ended.status_code == 200 and ended.json()["ended_at"] is not None
    assert _refusal(_directory(client, tenant.runtime, run)) == (403, "run_ended")
    again = client.post(f"/runs/{run}/end", headers=auth(tenant.runtime))
    assert again.status_code == 200 and again.json()["ended_at"] == ended.json()["ended_at"]
    assert client.get(f"/runs/{run}", headers=auth(tenant.runtime)).json()["ended_at"] == ended.json()["ended_at"]


def test_a_missing_foreign_or_other_users_run_is_the_same_404(
    client: TestClient, tenant: Tenant, make_key: MakeKey
) -> None:
    bobs = _start(client, make_key(tenant=tenant.tenant_id, user="bob", roles=("agent_runtime",)))["run_id"]
    elsewhere = make_key(user="alice", roles=("agent_runtime",))
    theirs = _start(client, elsewhere)["run_id"]
    missing = str(uuid.uuid4())
    answers = []
    for run in (bobs, theirs, missing, "not-a-uuid"):
        calls = [client.get(f"/runs/{run}", headers=auth(tenant.runtime)),
                 client.post(f"/runs/{run}/end", headers=auth(tenant.runtime))]
        if run != "not-a-uuid":  # in the header a malformed id is a 422 (below); in a path, an id that does not exist
            calls.append(_directory(client, tenant.runtime, run))
        for answer in calls:
            assert answer.status_code == 404, answer.text
            error = answer.json()["error"]
            answers.append({**error, "message": error["message"].replace(run, "<id>")})
    assert all(answer == answers[0] for answer in answers) and answers[0]["code"] == "run_not_found"
    assert _directory(client, elsewhere, theirs).status_code == 200  # its own tenant's user reads it


def test_a_thread_mismatch_a_malformed_run_id_and_a_thread_without_a_run_are_refused(
    client: TestClient, tenant: Tenant, make_key: MakeKey
) -> None:
    run = _start(client, tenant.runtime, thread="th-1")["run_id"]
    assert _directory(client, tenant.runtime, run, **{"X-Mnemo-Thread": "th-1"}).status_code == 200
    assert _refusal(_directory(client, tenant.runtime, run, **{"X-Mnemo-Thread": "th-2"})) == (
        403, "run_thread_mismatch")
    assert _refusal(_directory(client, tenant.runtime, "not-a-run")) == (422, "invalid_run_id")
    own = make_key(tenant=tenant.tenant_id, user="alice", roles=())
    assert _refusal(_directory(client, own, None, **{"X-Mnemo-Thread": "th-1"})) == (422, "thread_without_run")
    # A key bound to another agent does not borrow the run's access.
    writer = make_key(tenant=tenant.tenant_id, user="alice", roles=("agent_runtime",), agent="writer")
    assert _refusal(_directory(client, writer, run)) == (403, "run_agent_mismatch")


def test_without_a_run_a_key_reads_under_its_agents_policy_or_else_its_ceiling(
    client: TestClient, tenant: Tenant, make_key: MakeKey
) -> None:
    agent = make_key(tenant=tenant.tenant_id, user="alice", roles=("memory_writer",), agent="planner")
    assert _grants(client, agent) == {"episode": (["list", "read"], ["/summary", "/title"]),
                                      "todo": (["list", "search", "read"], ["/notes", "/status", "/title"])}
    stranger_agent = make_key(tenant=tenant.tenant_id, user="alice", roles=(), agent="nobody")
    assert _grants(client, stranger_agent) == {}  # no policy: no access
    own = _grants(client, make_key(tenant=tenant.tenant_id, user="alice", roles=()))
    assert len(own) == 14 and "/notes" in own["todo"][1]  # the nine business types and mnemo's own five
    public = _grants(client, make_key(tenant=tenant.tenant_id, user="alice", roles=("public_client",)))
    assert set(public) == {"calendar", "contact", "episode", "todo", "voice_memo"}
    public_agent = make_key(tenant=tenant.tenant_id, user="alice", roles=("public_client",), agent="planner")
    assert _grants(client, public_agent) == {"episode": (["list", "read"], ["/summary", "/title"]),
                                             "todo": (["list", "search", "read"], ["/status", "/title"])}


@contextmanager
def _unreadable(postgres: PostgresInfo, table: str) -> Iterator[None]:
    """The application's role loses SELECT on ``table`` (a real permission failure), and gets it back after."""
    with psycopg.connect(postgres.conninfo(), autocommit=True) as admin:
        admin.execute(f"REVOKE SELECT ON {table} FROM {APP_ROLE}")
        try:
            yield
        finally:
            admin.execute(f"GRANT SELECT ON {table} TO {APP_ROLE}")


def test_an_unreadable_policy_store_refuses_every_read_and_every_registration(
    client: TestClient, tenant: Tenant, make_key: MakeKey, postgres: PostgresInfo, engine: Engine
) -> None:
    run = _start(client, tenant.runtime)["run_id"]
    agent = make_key(tenant=tenant.tenant_id, user="alice", roles=(), agent="planner")
    with _unreadable(postgres, "resource_policies"):
        for answer in (_directory(client, tenant.runtime, run), _directory(client, agent),
                       client.post("/runs", json={"thread_id": "th-9", "agent_id": "planner"},
                                   headers=auth(tenant.runtime))):
            assert _refusal(answer) == (503, "policy_unavailable"), answer.text
            assert answer.headers["Retry-After"] == "5"
        # A user's own key reads no policy: the ceiling alone, still served.
        assert _directory(client, make_key(tenant=tenant.tenant_id, user="alice", roles=())).status_code == 200
    with _unreadable(postgres, "resource_runs"):
        assert _refusal(_directory(client, tenant.runtime, run)) == (503, "policy_unavailable")
    with tenant_session(engine, tenant.tenant_id) as session:  # the refused registration wrote nothing
        assert session.execute(select(func.count()).select_from(ResourceRun)).scalar_one() == 1
    assert _directory(client, tenant.runtime, run).status_code == 200
