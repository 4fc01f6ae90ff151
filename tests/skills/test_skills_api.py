"""``/skills`` and ``mnemo skills`` over the real API and PostgreSQL (issue 27, item 5): pushes are versioned and
idempotent, resolution is SYSTEM → TENANT → AGENT field by field with the winning layer recorded, and another
tenant's skill is never resolved."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from api.cli.skills import skills_app
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.skills.resolve import resolved_skills
from memory.skills.system import system_skills
from tests.conftest import MakeKey, auth
from tests.workers import served


def skill_md(name: str, version: str = "1.0.0", **fields: str) -> str:
    """A SKILL.md: front matter lines given as ``description=...`` etc., sections as ``role=...``."""
    front = [f"name: {name}", f"version: '{version}'"]
    body = []
    for key, value in fields.items():
        if key in ("description", "tools", "constraints"):
            front.append(f"{key}: {value}")
        else:
            body.append(f"## {key.replace('_', ' ').capitalize()}\n{value}\n")
    return "---\n" + "\n".join(front) + "\n---\n" + "\n".join(body)


def push(client: TestClient, key: str, files: dict[str, str], space: str = "TENANT", agent: str | None = None) -> Any:
    return client.post("/skills", json={"space": space, "files": files}, params={"agent": agent} if agent else None,
                       headers=auth(key))


@pytest.fixture()
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def test_a_push_is_numbered_and_the_latest_tree_again_is_idempotent(
    client: TestClient, make_key: MakeKey, tenant: str, engine: Engine
) -> None:
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    first = {"SKILL.md": skill_md("digest", description="Digest things.", role="An editor."),
             "examples/a.md": "example\n", "examples/b.md": "example\n"}
    second = {**first, "SKILL.md": skill_md("digest", "1.1.0", description="Digest things.", role="A terse editor.")}
    answers = [push(client, admin, files) for files in (first, first, second, first)]
    assert [a.status_code for a in answers] == [201, 200, 201, 201], [a.text for a in answers]
    bodies = [a.json() for a in answers]
    assert [b["version"] for b in bodies] == [1, 1, 2, 3]  # the older tree again is a rollback: a new version
    assert [b["replayed"] for b in bodies] == [False, True, False, False]
    assert bodies[0]["tree_sha256"] == bodies[3]["tree_sha256"] != bodies[2]["tree_sha256"]
    assert bodies[2]["declared_version"] == "1.1.0" and bodies[0]["space"] == "TENANT"
    assert bodies[0]["agent_id"] is None and bodies[0]["pushed_by"] == "root"
    with tenant_session(engine, tenant) as session:
        blobs = session.execute(text("SELECT count(*) FROM skill_blobs")).scalar_one()
    assert blobs == 3  # two SKILL.md texts and the example (two paths, one text), each stored once
    versions = client.get("/skills/digest/versions", headers=auth(admin)).json()
    assert [v["version"] for v in versions["items"]] == [1, 2, 3] and versions["system"] is None
    shown = client.get("/skills/digest", headers=auth(admin)).json()
    assert shown["fields"]["role"]["value"] == "An editor." and shown["fields"]["role"]["provenance"]["version"] == 3
    assert shown["files"]["examples/a.md"]["value"] == "example\n"


def test_overlays_resolve_field_by_field_and_record_the_winning_layer(
    client: TestClient, make_key: MakeKey, tenant: str
) -> None:
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    planner = make_key(tenant=tenant, user="bot", agent="planner")
    plain = make_key(tenant=tenant, user="carol")
    tenant_layer = push(client, admin, {"SKILL.md": skill_md("monthly-report", "7", strategy="Start from the CFO's "
                                                                                              "template.")})
    assert tenant_layer.status_code == 201, tenant_layer.text
    overlay = push(client, planner, {"SKILL.md": skill_md("monthly-report", "7-planner",
                                                          constraints="[Write in Chinese.]")}, space="AGENT")
    assert overlay.status_code == 201 and overlay.json()["agent_id"] == "planner", overlay.text

    seen = client.get("/skills/monthly-report", headers=auth(planner)).json()
    system = system_skills()["monthly-report"]
    winners = {field: won["provenance"]["space"] for field, won in seen["fields"].items()}
    assert winners == {"description": "SYSTEM", "role": "SYSTEM", "strategy": "TENANT", "constraints": "AGENT",
                       "tools": "SYSTEM", "prompt_template": "SYSTEM", "examples": "SYSTEM"}
    assert seen["fields"]["constraints"]["value"] == ["Write in Chinese."]
    assert seen["fields"]["strategy"]["value"] == "Start from the CFO's template."
    assert seen["fields"]["description"]["value"] == system.fields["description"]
    assert [(layer["space"], layer["version"]) for layer in seen["layers"]] == [("SYSTEM", None), ("TENANT", 1),
                                                                                 ("AGENT", 1)]
    assert seen["fields"]["strategy"]["provenance"]["tree_sha256"] == tenant_layer.json()["tree_sha256"]
    assert seen["fields"]["role"]["provenance"]["tree_sha256"] == system.tree_sha256

    # A key of no agent, or of another agent, resolves without the planner's overlay.
    for other in (plain, make_key(tenant=tenant, user="bot", agent="writer")):
        constraints = client.get("/skills/monthly-report", headers=auth(other)).json()["fields"]["constraints"]
        assert constraints["provenance"]["space"] == "SYSTEM", constraints
    listed = {s["name"]: s for s in client.get("/skills", headers=auth(planner)).json()["items"]}
    assert listed["monthly-report"]["winners"]["constraints"] == "AGENT"
    assert listed["incident-digest"]["winners"] == {field: "SYSTEM" for field in listed["incident-digest"]["winners"]}
    versions = client.get("/skills/monthly-report/versions", headers=auth(plain)).json()
    assert versions["system"]["declared_version"] == system.declared_version
    assert [(v["space"], v["agent_id"], v["version"]) for v in versions["items"]] == [("TENANT", None, 1),
                                                                                      ("AGENT", "planner", 1)]


def test_another_tenants_skill_is_never_resolved_and_answers_like_a_missing_one(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    acme, globex = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    acme_admin = make_key(tenant=acme, user="root", roles=("admin",))
    assert push(client, acme_admin, {"SKILL.md": skill_md("acme-close", description="Acme's close.",
                                                           role="Acme only.")}).status_code == 201
    # globex overlays the SYSTEM skill of the same name space: acme's TENANT layer must not be under it.
    assert push(client, acme_admin, {"SKILL.md": skill_md("monthly-report", role="Acme's role.")}).status_code == 201
    stranger = make_key(tenant=globex, user="root", roles=("admin",), agent="planner")
    for path in ("/skills/acme-close", "/skills/acme-close/versions"):
        theirs, nothing = (client.get(p, headers=auth(stranger)) for p in (path, path.replace("acme", "nope")))
        assert theirs.status_code == nothing.status_code == 404
        assert theirs.json()["error"]["code"] == nothing.json()["error"]["code"] == "skill_not_found"
    names = [s["name"] for s in client.get("/skills", headers=auth(stranger)).json()["items"]]
    assert "acme-close" not in names
    role = client.get("/skills/monthly-report", headers=auth(stranger)).json()["fields"]["role"]
    assert role["provenance"]["space"] == "SYSTEM" and "Acme" not in role["value"]
    overlay = push(client, stranger, {"SKILL.md": skill_md("acme-close", role="x")}, space="AGENT")
    assert (overlay.status_code, overlay.json()["error"]["code"]) == (422, "skill_base_missing")
    with tenant_session(engine, globex) as session:
        assert "acme-close" not in {s.name for s in resolved_skills(session, globex, "planner")}


def test_who_may_push_where(client: TestClient, make_key: MakeKey, tenant: str) -> None:
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    writer = make_key(tenant=tenant, user="w", roles=("memory_writer", "operator"))
    planner = make_key(tenant=tenant, user="bot", agent="planner")
    files = {"SKILL.md": skill_md("monthly-report", tools="[mnemo]")}
    refused = push(client, writer, files)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")
    unbound = push(client, writer, files, space="AGENT")
    assert (unbound.status_code, unbound.json()["error"]["code"]) == (422, "agent_required")
    others = push(client, planner, files, space="AGENT", agent="writer")
    assert others.status_code == 403, others.text
    named = push(client, admin, files, space="AGENT", agent="writer")
    assert named.status_code == 201 and named.json()["agent_id"] == "writer", named.text
    own = push(client, planner, files, space="AGENT", agent="planner")
    assert own.status_code == 201 and own.json()["agent_id"] == "planner", own.text
    tenant_with_agent = push(client, admin, files, agent="planner")
    assert tenant_with_agent.json()["error"]["code"] == "agent_not_expected"
    new_without_description = push(client, admin, {"SKILL.md": skill_md("brand-new", role="x")})
    assert new_without_description.status_code == 422
    assert new_without_description.json()["error"]["details"] == {"file": "SKILL.md", "field": "description"}
    bad = push(client, admin, {"SKILL.md": skill_md("monthly-report", role="x") + "## Notes\ny\n"})
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert (error["code"], error["details"]) == ("unknown_skill_section", {"file": "SKILL.md", "field": "Notes"})
    assert client.get("/skills/Not_A_Name", headers=auth(admin)).status_code == 422


@pytest.fixture(scope="module")
def api_url(settings: Settings) -> Iterator[str]:
    """The suite's API behind a real uvicorn: the CLI reaches it over HTTP like any client."""
    with served(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}"


def test_the_cli_pushes_a_real_directory_then_lists_and_shows_it(
    api_url: str, make_key: MakeKey, tenant: str, tmp_path: Path
) -> None:
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    directory = tmp_path / "triage"
    (directory / "examples").mkdir(parents=True)
    (directory / "SKILL.md").write_text(skill_md("triage", "0.9", description="Triage a ticket.",
                                                 role="A calm triager."), encoding="utf-8")
    (directory / "examples" / "one.md").write_text("P1: outage\n", encoding="utf-8")
    (directory / ".DS_Store").write_text("junk", encoding="utf-8")

    def cli(*args: str) -> Any:
        return CliRunner().invoke(skills_app, [*args, "--api-url", api_url, "--key", admin])

    pushed = cli("push", str(directory), "--space", "tenant")
    assert pushed.exit_code == 0, pushed.output
    assert pushed.output.startswith("triage pushed as version 1 of TENANT, declared 0.9"), pushed.output
    again = cli("push", str(directory), "--space", "tenant", "--json")
    assert json.loads(again.output)["replayed"] is True
    assert set(json.loads(again.output)["manifest"]) == {"SKILL.md", "examples/one.md"}  # hidden files left out
    listed = cli("list")
    assert any(line.split()[:2] == ["triage", "TENANT"] for line in listed.output.splitlines()), listed.output
    shown = cli("show", "triage")
    assert "## role  [TENANT v1]\nA calm triager." in shown.output and "P1: outage" in shown.output, shown.output
    refused = cli("push", str(directory), "--space", "agent")
    assert refused.exit_code == 1 and "agent_required" in refused.output
    missing = cli("push", str(tmp_path), "--space", "tenant")
    assert missing.exit_code == 1 and "holds no SKILL.md" in missing.output
