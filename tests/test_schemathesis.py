"""Schemathesis over the served OpenAPI, in CI (issue 12, deliver 3): 0 server errors, 0 schema violations.

The requests go over HTTP to a real uvicorn running the app with the protocol ``mnemo api`` serves with
(:class:`api.httpserver.BoundedHttpToolsProtocol`), against the real PostgreSQL and Temporal: the
request-head limits, the JSON parsing of raw bytes and the error handlers are then the production ones,
which an in-process ASGI call would partly bypass. The schema is the one that server serves.

Every generated case is sent twice: as an admin of a fresh tenant and as a key with no roles in it.
Checks: no 5xx, every status documented, the body and content type those of the documented response,
documented headers present, invalid data rejected, and valid data accepted except where a rule the
schema cannot express refuses it with its own code (:data:`CROSS_FIELD_RULES`). Bounded and derandomized:
a fixed number of examples per operation and mode, Hypothesis derandomized (a fixed seed per test) and
no example database, so a run is repeatable.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import Engine

from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey
from tests.workers import ThreadWorker, served

SCALE = int(os.environ.get("MNEMO_SCHEMATHESIS_SCALE", "1"))
"""A deeper run by hand: MNEMO_SCHEMATHESIS_SCALE=10 sends ten times as many cases (CI runs 1)."""
EXAMPLES = {GenerationMode.POSITIVE: 6 * SCALE, GenerationMode.NEGATIVE: 3 * SCALE}
"""Per operation and mode; 30 operations, each case sent with two keys (~270 requests). Negative cases
cost more to generate than to send (Hypothesis filters a lot to break a schema in one place), hence fewer."""

TIMESTAMP_EDGE = "timestamp_out_of_range"
"""The UTC edge of the timestamp range: the schema bounds the written year, but an offset moves a time
written as 2199-12-31T23:00:00-05:00 past 2200-01-01Z (and 1900-01-01T00:30:00+01:00 before 1900)."""

CROSS_FIELD_RULES: dict[str, set[str]] = {
    # A category that does not belong to the space (PROFILE is a USER memory), a SESSION memory without a
    # session_id, an AGENT memory from a key bound to no agent: rules between fields and the credential. And
    # exactly one of content and message, a message (or the one it replies to) with a speaker and something said.
    "POST /memory-candidates": {"category_space_mismatch", "session_id_required", "agent_credential_required",
                                "content_or_message", "message_empty", "message_speaker_required", TIMESTAMP_EDGE},
    "PATCH /memories/{memory_id}": {"inference_cannot_correct", TIMESTAMP_EDGE},
    # A query made only of characters no index can search (punctuation, spaces).
    "POST /memory-query": {"empty_query", TIMESTAMP_EDGE},
    "POST /recall/render": {"empty_query", TIMESTAMP_EDGE},
    # The report definition's currencies (the schema says three capitals), and a rejection without a reason.
    "POST /tasks": {"unsupported_currency"},
    "POST /tasks/{task_id}/approvals": {"reason_required"},
    # An artifact's bytes are decoded strictly (the schema says "a string"), its name unique within the call.
    "POST /tasks/{task_id}/attempts/{attempt_id}/complete": {"invalid_base64", "duplicate_artifact_name"},
    # A NUL inside a free-form payload: the schema cannot say "no NUL at any depth" of an open object.
    "POST /memory-events": {"invalid_character", TIMESTAMP_EDGE},
    # A batch's items are open objects (each checked on its own, its problems the item's error): a NUL in one.
    "POST /memory-events:batch": {"invalid_character"},
    "POST /memory-candidates:batch": {"invalid_character"},
    # A thread named without its run; an agent id in a path (a plain string there, see _negatable) of another
    # shape; a policy's fields checked against the type's declaration (which the path names).
    "GET /resources": {"thread_without_run"},
    # The reader's rules beyond the schema: a cursor is an opaque token only the API issues (any other string
    # is garbled), a query needs a word an index can search, a ref names a type and an id.
    "GET /resources/{resource}": {"thread_without_run", "cursor_invalid"},
    "POST /resources/search": {"thread_without_run", "invalid_query"},
    "POST /resources/read": {"thread_without_run", "cursor_invalid", "invalid_ref"},
    "GET /policies/{agent_id}": {"invalid_agent_id"},
    "GET /policies/{agent_id}/{resource}": {"invalid_agent_id"},
    "DELETE /policies/{agent_id}/{resource}": {"invalid_agent_id"},
    "PUT /policies/{agent_id}/{resource}": {"invalid_agent_id", "unknown_field_path", "unknown_operation",
                                             "title_not_granted", "duplicate_entry"},
    # A host or port the URL pattern lets through but no URL has ("http://[x", a port over 65535); a host that
    # does not resolve, or resolves to an address that is not public (memory.egress).
    "PUT /tenant-webhook": {"invalid_webhook_url", "webhook_host_unresolvable", "webhook_address_not_public"},
    # The same guard for a webhook destination; a name's shape (a path string, see _negatable), and which fields
    # go with which kind.
    "PUT /publish-destinations/{name}": {"invalid_webhook_url", "webhook_host_unresolvable",
                                         "webhook_address_not_public", "invalid_destination_name",
                                         "webhook_fields_missing", "archive_fields_unexpected"},
    # A definition's rules between its parts (a step's own keys by kind, references to earlier steps, a goal
    # schema that is itself valid) and the deployment's (an llm step needs an LLM endpoint); a NUL inside the
    # goal schema or a step, both open objects.
    "PUT /task-definitions/{task_type}": {"invalid_definition", "llm_endpoint_not_configured", "invalid_character"},
    # A schedule's name, cron and zone (plain strings in the schema), its goal's placeholders, its type being
    # registered and its goal satisfying the type's schema (as POST /tasks checks them).
    "PUT /task-schedules/{name}": {"invalid_schedule_name", "invalid_cron", "invalid_timezone", "schedule_refused",
                                   "unknown_placeholder", "invalid_value", "missing_field", "unknown_field",
                                   "invalid_type", "unsupported_currency", "invalid_character"},
    # A pushed directory's SKILL.md (its front matter and sections, in a text the schema sees as a string), its
    # paths and sizes, an overlay without a skill under it, and the space against the key's agent.
    "POST /skills": {"skill_md_missing", "skill_front_matter_missing", "invalid_skill_yaml", "unknown_skill_field",
                     "missing_skill_field", "invalid_skill_field", "invalid_skill_name", "unknown_skill_section",
                     "duplicate_skill_section", "empty_skill_section", "skill_text_outside_sections", "empty_skill",
                     "invalid_skill_path", "skill_too_large", "skill_base_missing", "agent_required",
                     "agent_not_expected", "invalid_character"},
    # A candidate's rules between fields (a claim or an incident, a PROJECT scope's project_id, a skill's name), the
    # shapes of keys, source refs and times (plain strings in the schema): every problem by path, one code. And a
    # NUL inside evidence or an incident, open objects.
    "POST /knowledge-candidates": {"knowledge_candidate_invalid", "invalid_character"},
    "PUT /knowledge-candidates/{candidate_id}": {"knowledge_candidate_invalid", "invalid_character"},
    "POST /knowledge-candidates/{candidate_id}/reviews": {"reason_required", "invalid_authority"},
}
"""422s on schema-valid requests that are the product's rules, per operation, by error code."""


@schemathesis.check
def positive_data_accepted(ctx: Any, response: Any, case: schemathesis.Case[Any]) -> bool | None:
    """ST202 (valid data accepted), but a 422 whose code is a documented cross-field rule of that
    operation passes. Any other 422 on schema-valid data is a finding (the schema says too little)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    code = response.json()["error"]["code"]
    allowed = CROSS_FIELD_RULES.get(f"{case.method.upper()} {case.path}", set())
    assert code in allowed, f"schema-valid data refused with 422 {code}: {response.text[:500]}"
    return None


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_accepted,
]


@pytest.fixture(scope="module")
def own_settings(settings: Settings, engine: Engine) -> Iterator[Settings]:
    """A task queue of this module's own, with a real worker on it: /readyz is then ready (200), and the
    tasks and deletions the run starts are really executed instead of waiting for nobody."""
    own = settings.model_copy(update={"task_queue": f"schemathesis-{uuid.uuid4().hex[:8]}"})
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine)).start()
    yield own
    worker.stop()


@pytest.fixture(scope="module")
def server(own_settings: Settings) -> Iterator[str]:
    with served(create_app(own_settings)) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def api_schema(server: str) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict(
        {
            "generation": {
                "max-examples": EXAMPLES[GenerationMode.POSITIVE], "deterministic": True, "database": "none",
                # The key is sent by the test itself (an admin, a roleless user); a negated or missing
                # Authorization is the 401 precedence tests' business (tests/test_input_guard.py).
                "with-security-parameters": False,
                # Unknown query parameters are ignored, as HTTP APIs commonly do; strict parsing (unknown
                # keys refused) is for bodies. Not generated as "invalid data" for that reason.
                "allow-extra-parameters": False,
            },
            "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
        }
    )
    return schemathesis.openapi.from_url(f"{server}/openapi.json", config=config)


@pytest.fixture(scope="module")
def keys(make_key: MakeKey, engine: Engine) -> tuple[str, str]:
    """An admin of a fresh tenant, and a user of that tenant with no roles at all.

    The tenant gets the small sales dataset first: report tasks the run starts then have data, and
    POST /report-data/sample (an admin may) finds it loaded instead of loading 120,000 lines inside
    the run, which on a loaded machine outlived the API's statement timeout (a 503 statement_timeout).
    """
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    keys = (make_key(tenant=tenant, user="root", roles=("admin",)), make_key(tenant=tenant, user="nobody", roles=()))
    with tenant_session(engine, tenant) as session:
        seed_sales(session, tenant, total=2_400)
    return keys


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


def _negatable(parameter: dict[str, Any]) -> bool:
    """A parameter an invalid value exists for: any but a bare string in the path (ids are plain strings
    on purpose, so a malformed id is the same 404 as a missing one; the NUL-free pattern every string
    carries cannot be broken in a URL path)."""
    schema = dict(parameter.get("schema", {}))
    if schema.get("pattern") == "^[^\\u0000]*$":
        del schema["pattern"]
    return parameter["in"] != "path" or set(schema) - {"type", "title", "description"} != set()


def _cases() -> list[tuple[str, GenerationMode]]:
    """Every operation of the app's OpenAPI in both modes; positive only for one with no input to get
    wrong (/healthz, /readyz, GET /tenant-policy, an operation whose only input is an id in its path). The app is
    built, not started: nothing is connected."""
    spec = create_app(Settings(database_url="postgresql+psycopg://unused@127.0.0.1:1/unused")).openapi()
    cases = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            has_input = "requestBody" in operation or any(_negatable(p) for p in operation.get("parameters", []))
            for mode in GenerationMode if has_input else [GenerationMode.POSITIVE]:
                cases.append((f"{method.upper()} {path}", mode))
    return cases


# The pytest plugin's own parametrize reads a private attribute pytest 9 no longer has, so the
# operations are parametrized here and each one runs its cases through Hypothesis directly.
@pytest.mark.parametrize(("label", "mode"), _cases(), ids=lambda value: str(value))
def test_api(
    label: str, mode: GenerationMode, api_schema: schemathesis.BaseSchema, keys: tuple[str, str], http: requests.Session
) -> None:
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None, label

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES[mode], derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate, Phase.shrink])
    def run(case: schemathesis.Case[Any]) -> None:
        for key in keys:
            case.call_and_validate(session=http, headers={"Authorization": f"Bearer {key}"}, checks=CHECKS,
                                   timeout=30)

    run()


def test_a_not_ready_answer_is_documented(settings: Settings) -> None:
    """/readyz's 503 (a dependency down) is in the OpenAPI with its body. Before, the OpenAPI listed only
    a 200 of any shape, and schemathesis reported the 503 as an undocumented status (run without a worker)."""
    from fastapi.testclient import TestClient

    down = settings.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"})
    with TestClient(create_app(down)) as api:
        response = api.get("/readyz")
        spec = schemathesis.openapi.from_dict(api.app.openapi())  # type: ignore[attr-defined]
    assert response.status_code == 503 and response.json()["checks"]["temporal"]["state"] == "unavailable"
    case = spec["/readyz"]["GET"].Case()
    case.validate_response(response, checks=[status_code_conformance, response_schema_conformance,
                                             content_type_conformance])


def test_a_dependency_that_is_down_is_a_documented_answer(settings: Settings, make_key: MakeKey) -> None:
    """The typed 503s (database_unavailable, statement_timeout, temporal_unavailable...) are in the OpenAPI
    of every operation that takes a key, and 429 tenant_busy on recall. Before, none was: the full run
    found a POST /report-data/sample whose 503 statement_timeout was an undocumented status (ST103)."""
    from fastapi.testclient import TestClient

    key = make_key(roles=("admin",))
    down = settings.model_copy(update={"database_url": f"postgresql+psycopg://postgres:pw@127.0.0.1:{free_port()}/mnemo"})
    with TestClient(create_app(down)) as api:
        response = api.post("/report-data/sample", json={"lines": 100}, headers={"Authorization": f"Bearer {key}"})
        spec = schemathesis.openapi.from_dict(api.app.openapi())  # type: ignore[attr-defined]
    assert response.status_code == 503 and response.json()["error"]["code"] == "database_unavailable", response.text
    spec["/report-data/sample"]["POST"].Case(body={"lines": 100}).validate_response(
        response, checks=[status_code_conformance, response_schema_conformance, content_type_conformance])
    for path, operations in spec.raw_schema["paths"].items():
        for method, operation in operations.items():
            if operation.get("security"):
                assert "503" in operation["responses"], (method, path)
    paths = spec.raw_schema["paths"]
    assert all("429" in paths[path]["post"]["responses"] for path in ("/memory-query", "/recall/render"))
