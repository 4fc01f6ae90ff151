"""Per-agent resource policies: checked against the declaration, set and deleted by admins only, every change
audited, per tenant; and ``mnemo policy`` over a real API on a real port."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from api.cli.app import app
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.models import AuditEntry
from tests.conftest import MakeKey, auth
from tests.workers import served


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _put(client: TestClient, key: str, agent: str, resource: str, body: dict[str, Any]) -> Any:
    return client.put(f"/policies/{agent}/{resource}", json=body, headers=auth(key))


def _audit(engine: Engine, tenant: str) -> list[dict[str, Any]]:
    with tenant_session(engine, tenant) as session:
        return list(session.execute(
            select(AuditEntry.detail)
            .where(AuditEntry.action == "RESOURCE_POLICY_CHANGED")
            .order_by(AuditEntry.audit_id)
        ).scalars())


def test_an_admin_sets_reads_replaces_and_deletes_a_policy_each_change_audited(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = _tenant()
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    set_ = _put(client, admin, "planner", "todo", {"operations": ["search", "list"], "fields": ["/title", "/status"]})
    assert set_.status_code == 200, set_.text
    assert {k: v for k, v in set_.json().items() if k != "updated_at"} == {
        "agent_id": "planner", "resource": "todo", "operations": ["list", "search"], "fields": ["/status", "/title"],
        "updated_by": "root"}
    widened = _put(client, admin, "planner", "todo", {"operations": ["read"], "fields": ["/title", "/notes"]})
    assert (widened.json()["operations"], widened.json()["fields"]) == (["read"], ["/notes", "/title"])
    episode = _put(client, admin, "planner", "episode",
                   {"operations": ["read"], "fields": ["/title", "/participants/*/display_name"]})
    assert episode.status_code == 200, episode.text

    listed = client.get("/policies/planner", headers=auth(admin)).json()
    assert listed["agent_id"] == "planner"
    assert [(p["resource"], p["operations"], p["fields"]) for p in listed["policies"]] == [
        ("episode", ["read"], ["/participants/*/display_name", "/title"]), ("todo", ["read"], ["/notes", "/title"])]
    one = client.get("/policies/planner/todo", headers=auth(admin))
    assert one.status_code == 200 and one.json()["fields"] == ["/notes", "/title"]

    deleted = client.delete("/policies/planner/todo", headers=auth(admin))
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"agent_id": "planner", "resource": "todo",
                              "revoked": {"resource": "todo", "operations": ["read"], "fields": ["/notes", "/title"]}}
    gone = client.get("/policies/planner/todo", headers=auth(admin))
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "policy_not_found")
    again = client.delete("/policies/planner/todo", headers=auth(admin))
    assert (again.status_code, again.json()["error"]["code"]) == (404, "policy_not_found")
    assert [p["resource"] for p in client.get("/policies/planner", headers=auth(admin)).json()["policies"]] == [
        "episode"]

    audit = _audit(engine, tenant)
    first = {"operations": ["list", "search"], "fields": ["/status", "/title"]}
    second = {"operations": ["read"], "fields": ["/notes", "/title"]}
    assert [(a["agent_id"], a["resource"], a["before"], a["after"]) for a in audit] == [
        ("planner", "todo", None, first),
        ("planner", "todo", first, second),
        ("planner", "episode", None, {"operations": ["read"], "fields": ["/participants/*/display_name", "/title"]}),
        ("planner", "todo", second, None),
    ]


@pytest.mark.parametrize(("resource", "body", "status", "code", "named"), [
    ("todo", {"operations": ["read"], "fields": ["/title", "/nope"]}, 422, "unknown_field_path", "/nope"),
    ("todo", {"operations": ["read"], "fields": ["/title", "/title/deeper"]}, 422, "unknown_field_path",
     "/title/deeper"),
    ("todo", {"operations": ["read"], "fields": ["title"]}, 422, "unknown_field_path", "title"),
    ("episode", {"operations": ["read"], "fields": ["/title", "/participants/*/age"]}, 422, "unknown_field_path",
     "/participants/*/age"),
    ("todo", {"operations": ["read", "write"], "fields": ["/title"]}, 422, "invalid_value", "operations"),
    ("user_profile", {"operations": ["search"], "fields": ["/title"]}, 422, "unknown_operation", "search"),
    ("todo", {"operations": ["read"], "fields": ["/status"]}, 422, "title_not_granted", "/title"),
    ("todo", {"operations": ["read", "read"], "fields": ["/title"]}, 422, "duplicate_entry", "distinct"),
    ("todo", {"operations": [], "fields": ["/title"]}, 422, "invalid_value", "operations"),
    ("todo", {"operations": ["read"], "fields": ["/title"], "agent_id": "other"}, 422, "identity_from_credentials",
     "agent_id"),
    ("todo", {"operations": ["read"], "fields": None}, 422, "null_not_allowed", "fields"),
    ("todo", {"operations": ["read"], "fields": ["/title"], "extra": 1}, 422, "unknown_field", "extra"),
    ("nothing", {"operations": ["read"], "fields": ["/title"]}, 404, "unknown_resource", "nothing"),
])
def test_a_policy_the_declaration_cannot_honour_is_refused_naming_the_problem(
    client: TestClient, make_key: MakeKey, resource: str, body: dict[str, Any], status: int, code: str, named: str
) -> None:
    admin = make_key(roles=("admin",))
    refused = _put(client, admin, "planner", resource, body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (status, code), refused.text
    assert named in refused.text
    assert client.get("/policies/planner", headers=auth(admin)).json()["policies"] == []


def test_a_malformed_agent_id_is_refused(client: TestClient, make_key: MakeKey) -> None:
    admin = make_key(roles=("admin",))
    refused = _put(client, admin, "bad agent", "todo", {"operations": ["read"], "fields": ["/title"]})
    assert (refused.status_code, refused.json()["error"]["code"]) == (422, "invalid_agent_id")


def test_only_an_admin_changes_policies_and_an_auditor_may_read_them(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = _tenant()
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    body = {"operations": ["read"], "fields": ["/title"]}
    assert _put(client, admin, "planner", "todo", body).status_code == 200
    for roles in [(), ("memory_writer",), ("auditor",), ("operator",), ("agent_runtime",), ("public_client",)]:
        key = make_key(tenant=tenant, user="bob", roles=roles)
        put = _put(client, key, "planner", "todo", {"operations": ["list"], "fields": ["/title"]})
        assert (put.status_code, put.json()["error"]["code"]) == (403, "forbidden"), roles
        deleted = client.delete("/policies/planner/todo", headers=auth(key))
        assert deleted.status_code == 403, roles
        listed = client.get("/policies/planner", headers=auth(key))
        assert listed.status_code == (200 if roles == ("auditor",) else 403), roles
    assert client.get("/policies/planner/todo", headers=auth(admin)).json()["operations"] == ["read"]
    assert len(_audit(engine, tenant)) == 1


def test_a_policy_is_its_tenants(client: TestClient, make_key: MakeKey) -> None:
    ours, theirs = make_key(roles=("admin",)), make_key(roles=("admin",))
    assert _put(client, ours, "planner", "todo", {"operations": ["read"], "fields": ["/title"]}).status_code == 200
    assert client.get("/policies/planner", headers=auth(theirs)).json()["policies"] == []
    missing = client.get("/policies/planner/todo", headers=auth(theirs))
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "policy_not_found")
    assert client.delete("/policies/planner/todo", headers=auth(theirs)).status_code == 404
    assert client.get("/policies/planner/todo", headers=auth(ours)).status_code == 200


def test_policy_routes_do_not_collide_with_the_tenant_policy(client: TestClient, make_key: MakeKey) -> None:
    admin = make_key(roles=("admin",))
    named = _put(client, admin, "tenant-policy", "todo", {"operations": ["read"], "fields": ["/title"]})
    assert named.status_code == 200 and named.json()["agent_id"] == "tenant-policy"
    assert client.get("/tenant-policy", headers=auth(admin)).json() == {"separation_of_duties": True}


@pytest.fixture(scope="module")
def api_url(settings: Settings) -> Iterator[str]:
    with served(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}"


def test_the_cli_sets_lists_and_deletes_policies(api_url: str, make_key: MakeKey, tmp_path: Path) -> None:
    key_file = tmp_path / "admin.key"
    key_file.write_text(make_key(user="root", roles=("admin",)) + "\n")

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, ["policy", *args, "--api-url", api_url, "--key-file", str(key_file)])
        assert result.exit_code == 0, result.output
        return result.stdout

    empty = run("list", "planner")
    assert empty.strip() == "agent planner has no policy: it may use no resource type"
    shown = run("set", "planner", "todo", "--operations", "list,search,read", "--fields", "/title,/status")
    assert shown.splitlines()[0].split() == ["AGENT_ID", "RESOURCE", "OPERATIONS", "FIELDS"]
    assert shown.splitlines()[1].split() == ["planner", "todo", "list,read,search", "/status,/title"]
    run("set", "planner", "episode", "--operations", "read", "--fields", "/title")
    listed = json.loads(run("list", "planner", "--json"))
    assert [(p["resource"], p["operations"], p["fields"]) for p in listed["policies"]] == [
        ("episode", ["read"], ["/title"]), ("todo", ["list", "read", "search"], ["/status", "/title"])]
    table = run("list", "planner").splitlines()
    assert table[0].split() == ["RESOURCE", "OPERATIONS", "FIELDS", "UPDATED_AT", "UPDATED_BY"]
    assert [line.split()[0] for line in table[1:]] == ["episode", "todo"]
    revoked = run("delete", "planner", "todo")
    assert revoked.strip() == "revoked agent planner's todo: list,read,search on /status,/title"
    assert [p["resource"] for p in json.loads(run("list", "planner", "--json"))["policies"]] == ["episode"]

    refused = CliRunner().invoke(app, ["policy", "set", "planner", "todo", "--operations", "read", "--fields",
                                       "/title,/nope", "--api-url", api_url, "--key-file", str(key_file)])
    assert refused.exit_code == 1
    assert "/nope" in refused.stderr and "(unknown_field_path, HTTP 422)" in refused.stderr
