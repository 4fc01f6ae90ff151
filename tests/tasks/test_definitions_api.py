"""``/task-definitions`` over the real API (issue 26, item 1): an admin registers versions of a task type (201 new,
200 the same body again, 409 another body), any key of the tenant reads them, another tenant's type is a 404 and
not listed, mnemo's own type is listed and reserved, and an ``llm`` step needs a configured LLM endpoint."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from typer.testing import CliRunner, Result

from api.cli.task import task_app
from api.main import create_app
from api.schemas.task_definitions import DEFINITION_EXAMPLE
from api.settings import Settings
from memory.db import tenant_session
from memory.errors import Conflict
from memory.reports.definitions import MONTHLY_REPORT_BODY
from memory.tasks.definition_store import latest, put_definition, versions
from memory.tasks.definitions import from_body
from tests.conftest import MakeKey, auth
from tests.workers import served

DIGEST: dict[str, Any] = DEFINITION_EXAMPLE
"""The OpenAPI's example of a definition: what a reader of the docs tries first registers."""
WITH_LLM: dict[str, Any] = {
    **DIGEST, "steps": [*DIGEST["steps"][:1], {"step_id": "draft", "kind": "llm", "prompt": "Summarise {{goal}}"},
                        *DIGEST["steps"][1:]],
}


def _put(client: TestClient, key: str, task_type: str, body: Any) -> Any:
    return client.put(f"/task-definitions/{task_type}", json=body, headers=auth(key))


@pytest.fixture()
def admin(make_key: MakeKey) -> str:
    return make_key(user="ada", roles=("admin",))


def test_a_version_is_registered_once_and_never_changes(client: TestClient, make_key: MakeKey,
                                                        engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, user="ada", roles=("admin",))
    created = _put(client, admin, "incident-digest", DIGEST)
    assert created.status_code == 201, created.text
    sha = created.json()["sha256"]
    assert created.json() == {"task_type": "incident-digest", "version": "1", "sha256": sha, "replayed": False}
    # The same body again, keys in another order: the same version, nothing written.
    again = _put(client, admin, "incident-digest", dict(reversed(list(DIGEST.items()))))
    assert (again.status_code, again.json()) == (200, {**created.json(), "replayed": True})
    changed = copy.deepcopy(DIGEST)
    changed["steps"][0]["description"] = "collect every incident"
    refused = _put(client, admin, "incident-digest", changed)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "definition_version_conflict"
    assert error["details"] == {"task_type": "incident-digest", "version": "1", "registered_sha256": sha}
    assert "new version" in error["message"]
    # Registered after "1", though it sorts before it: versions are ordered by registration, not by name.
    assert _put(client, admin, "incident-digest", {**changed, "version": "0.9"}).status_code == 201
    shown = client.get("/task-definitions/incident-digest", headers=auth(admin)).json()
    assert shown["source"] == "tenant"
    assert [(v["version"], v["body"], v["created_by"]) for v in shown["versions"]] == [
        ("1", DIGEST, "ada"), ("0.9", {**changed, "version": "0.9"}, "ada")]
    assert shown["versions"][0]["sha256"] == sha and shown["versions"][0]["created_at"]
    listed = client.get("/task-definitions", headers=auth(admin)).json()["items"]
    assert [(i["task_type"], i["latest_version"], i["versions"]) for i in listed] == [
        ("incident-digest", "0.9", ["1", "0.9"]), ("monthly-report", "monthly-report-v1", ["monthly-report-v1"])]
    with tenant_session(engine, tenant) as session:
        audited = session.execute(text(
            "SELECT detail->>'version' FROM audit_log WHERE action = 'TASK_DEFINITION_REGISTERED' ORDER BY audit_id"
        )).scalars().all()
        newest, none = latest(session, tenant, "incident-digest"), latest(session, tenant, "weekly")
    assert audited == ["1", "0.9"]  # the replay was not audited: it wrote nothing
    # New tasks start on the version registered last.
    assert newest is not None and (newest.version, newest.sha256) == ("0.9", shown["versions"][1]["sha256"])
    assert none is None


def test_only_an_admin_registers_and_every_key_of_the_tenant_reads(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, user="ada", roles=("admin",))
    for roles in ((), ("memory_writer",), ("approver",), ("operator",), ("auditor",)):
        plain = make_key(tenant=tenant, user="bob", roles=roles)
        refused = _put(client, plain, "incident-digest", DIGEST)
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden"), roles
        assert "admin" in refused.json()["error"]["message"]
    assert client.get("/task-definitions/incident-digest", headers=auth(admin)).status_code == 404  # none written
    assert _put(client, admin, "incident-digest", DIGEST).status_code == 201
    reader = make_key(tenant=tenant, user="bob", roles=())
    listed = client.get("/task-definitions", headers=auth(reader))
    assert listed.status_code == 200
    assert {"task_type": "incident-digest", "source": "tenant", "latest_version": "1", "versions": ["1"],
            "steps": [{"step_id": s["step_id"], "kind": s["kind"]} for s in DIGEST["steps"]]} in listed.json()["items"]
    assert client.get("/task-definitions/incident-digest", headers=auth(reader)).status_code == 200


def test_another_tenants_type_is_a_missing_one(client: TestClient, make_key: MakeKey) -> None:
    ours, theirs = make_key(roles=("admin",)), make_key(roles=("admin",))
    assert _put(client, theirs, "secret-digest", DIGEST).status_code == 201
    mine = client.get("/task-definitions/secret-digest", headers=auth(ours))
    never = client.get("/task-definitions/never-defined", headers=auth(ours))
    assert mine.status_code == never.status_code == 404
    assert mine.json()["error"]["code"] == never.json()["error"]["code"] == "task_type_not_found"
    assert mine.json()["error"]["message"].replace("secret-digest", "X") == \
        never.json()["error"]["message"].replace("never-defined", "X")
    listed = {item["task_type"]: item["source"] for item in
              client.get("/task-definitions", headers=auth(ours)).json()["items"]}
    # Only code types (mnemo's, and any SDK module a test loaded in this process): none of theirs.
    assert "secret-digest" not in listed and set(listed.values()) <= {"builtin", "code"}
    # Their version 1 does not bind ours: the same name and version with another body is a new type here.
    assert _put(client, ours, "secret-digest", {**DIGEST, "redraft_step": "collect"}).status_code == 201


def test_the_builtin_monthly_report_is_listed_and_reserved(client: TestClient, admin: str) -> None:
    listed = client.get("/task-definitions", headers=auth(admin)).json()["items"]
    monthly = next(item for item in listed if item["task_type"] == "monthly-report")
    assert monthly["source"] == "builtin" and monthly["latest_version"] == "monthly-report-v1"
    assert [s["step_id"] for s in monthly["steps"]] == [
        "load_data", "validate_data", "calculate_metrics", "generate_charts", "generate_draft", "request_approval",
        "publish_report"]
    shown = client.get("/task-definitions/monthly-report", headers=auth(admin)).json()
    assert shown["source"] == "builtin" and shown["versions"][0]["body"] == MONTHLY_REPORT_BODY
    assert shown["versions"][0]["created_by"] is None
    refused = _put(client, admin, "monthly-report", {**DIGEST, "version": "monthly-report-v2"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "task_type_reserved"
    assert client.get("/task-definitions/monthly-report", headers=auth(admin)).json() == shown


def test_an_invalid_body_lists_every_problem(client: TestClient, admin: str) -> None:
    body = copy.deepcopy(DIGEST)
    body["steps"][1].pop("function")
    body["steps"][2]["artifact_from"] = "publish/digest.md"
    body["owner"] = "ada"
    refused = _put(client, admin, "incident-digest", body)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_definition"
    assert [(p["path"], p["code"]) for p in error["details"]["problems"]] == [
        ("/owner", "unknown_field"), ("/steps/1/function", "missing_field"),
        ("/steps/2/artifact_from", "invalid_value")]
    assert "/owner" in error["message"] and "2 more problems" in error["message"]
    for not_an_object in ([DIGEST], "a definition"):
        response = _put(client, admin, "incident-digest", not_an_object)
        assert response.status_code == 422, response.text
    bad_name = _put(client, admin, "Incident_Digest", DIGEST)
    assert bad_name.status_code == 422 and bad_name.json()["error"]["code"] == "invalid_value", bad_name.text
    assert client.get("/task-definitions/incident-digest", headers=auth(admin)).status_code == 404


def test_a_goal_schema_names_its_own_codes_well(client: TestClient, admin: str) -> None:
    body = copy.deepcopy(DIGEST)
    body["goal_schema"]["properties"]["service"]["x-mnemo-code"] = "Unknown Service"
    refused = _put(client, admin, "incident-digest", body)
    assert refused.status_code == 422, refused.text
    assert [(p["path"], p["code"]) for p in refused.json()["error"]["details"]["problems"]] == [
        ("/goal_schema/properties/service/x-mnemo-code", "invalid_goal_schema")]
    body["goal_schema"]["properties"]["service"]["x-mnemo-code"] = "unknown_service"
    assert _put(client, admin, "incident-digest", body).status_code == 201


def test_an_llm_step_needs_an_llm_endpoint(client: TestClient, settings: Settings, admin: str,
                                           make_key: MakeKey) -> None:
    assert settings.llm_config() is None  # the suite's API names no endpoint
    refused = _put(client, admin, "incident-digest", WITH_LLM)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "llm_endpoint_not_configured" and error["details"] == {"steps": ["draft"]}
    assert "MNEMO_LLM_BASE_URL" in error["message"] and "MNEMO_LLM_MODEL" in error["message"]
    assert client.get("/task-definitions/incident-digest", headers=auth(admin)).status_code == 404
    assert _put(client, admin, "incident-digest", DIGEST).status_code == 201  # no llm step: no endpoint needed


@pytest.fixture(scope="module")
def llm_client(settings: Settings) -> Iterator[TestClient]:
    """An API whose settings name an LLM endpoint (nothing listens there: registering never calls the model)."""
    named = settings.model_copy(update={"llm_base_url": "http://127.0.0.1:9/v1", "llm_model": "stand-in"})
    with TestClient(create_app(named)) as configured:
        yield configured


def test_an_llm_step_is_accepted_where_an_endpoint_is_configured(llm_client: TestClient, admin: str) -> None:
    created = _put(llm_client, admin, "incident-digest", WITH_LLM)
    assert created.status_code == 201, created.text
    listed = llm_client.get("/task-definitions", headers=auth(admin)).json()["items"]
    digest = next(item for item in listed if item["task_type"] == "incident-digest")
    assert [s["kind"] for s in digest["steps"]] == ["agent", "llm", "compute", "approval", "publish"]


@pytest.fixture(scope="module")
def api_url(settings: Settings) -> Iterator[str]:
    """The suite's API behind a real uvicorn: the CLI reaches it over HTTP like any client."""
    with served(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}"


def _cli(api_url: str, key: str, *args: str) -> Result:
    return CliRunner().invoke(task_app, [*args, "--api-url", api_url, "--key", key])


def test_the_cli_registers_lists_and_shows_definitions(api_url: str, admin: str, tmp_path: Path) -> None:
    path = tmp_path / "digest.json"
    path.write_text(json.dumps(DIGEST), encoding="utf-8")
    first = _cli(api_url, admin, "definition", "put", "incident-digest", "--file", str(path))
    assert first.exit_code == 0, first.output
    assert first.output.startswith("incident-digest version 1 registered (sha256 ")
    again = _cli(api_url, admin, "definition", "put", "incident-digest", "--file", str(path))
    assert "version 1 was already registered with this body" in again.output, again.output

    types = _cli(api_url, admin, "types")
    assert types.exit_code == 0, types.output
    lines = types.output.splitlines()
    assert lines[0].split() == ["TASK_TYPE", "SOURCE", "LATEST_VERSION", "STEPS"]
    assert lines[1].split()[:3] == ["incident-digest", "tenant", "1"]
    assert "collect (agent) → render (compute) → review (approval) → publish (publish)" in lines[1]
    assert lines[2].split()[:3] == ["monthly-report", "builtin", "monthly-report-v1"]

    shown = _cli(api_url, admin, "definition", "show", "incident-digest", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["versions"][0]["body"] == DIGEST
    person = _cli(api_url, admin, "definition", "show", "incident-digest")
    assert person.output.startswith("incident-digest (tenant)\nVERSION") and '"redraft_step": "render"' in person.output


def test_the_cli_says_what_is_wrong_with_a_definition(api_url: str, admin: str, make_key: MakeKey,
                                                      tmp_path: Path) -> None:
    broken = copy.deepcopy(DIGEST)
    broken["steps"][1].pop("function")
    broken["colour"] = "blue"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    refused = _cli(api_url, admin, "definition", "put", "incident-digest", "--file", str(path))
    assert refused.exit_code == 1
    assert "(invalid_definition, HTTP 422)" in refused.output
    assert "\n  /colour: not a field" in refused.output and "\n  /steps/1/function: a compute step needs" \
        in refused.output
    path.write_text("{not json", encoding="utf-8")
    garbled = _cli(api_url, admin, "definition", "put", "incident-digest", "--file", str(path))
    assert garbled.exit_code == 1 and "is not a JSON document" in garbled.output
    plain = make_key(roles=("memory_writer",))
    path.write_text(json.dumps(DIGEST), encoding="utf-8")
    forbidden = _cli(api_url, plain, "definition", "put", "incident-digest", "--file", str(path))
    assert forbidden.exit_code == 1 and "(forbidden, HTTP 403)" in forbidden.output
    missing = _cli(api_url, admin, "definition", "show", "nothing-here")
    assert missing.exit_code == 1 and "(task_type_not_found, HTTP 404)" in missing.output


def test_racing_registrations_of_a_version_agree_on_one_body(engine: Engine, make_key: MakeKey) -> None:
    """Eight admins register version 1 at once, half with another body: one body wins, the same body is a replay
    of it, every other one is the 409 naming the winner."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant, roles=("admin",))  # the tenant
    bodies = [DIGEST if n % 2 else {**DIGEST, "redraft_step": "collect"} for n in range(8)]
    start = threading.Barrier(len(bodies))

    def register(body: dict[str, Any]) -> str:
        definition = from_body("incident-digest", body)
        start.wait()
        try:
            with tenant_session(engine, tenant) as session:
                return "created" if put_definition(session, tenant, definition, "ada") else definition.sha256
        except Conflict as conflict:
            return f"conflict {conflict.details['registered_sha256']}"

    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(register, bodies))
    with tenant_session(engine, tenant) as session:
        [winner] = versions(session, tenant, "incident-digest")
    sha = winner.definition.sha256
    assert answers.count("created") == 1
    assert set(answers) - {"created"} == {f"conflict {sha}", sha}
