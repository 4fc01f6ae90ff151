"""Malformed input is a typed 422 (or 401, or 431) on every route, never a 500 or plain text.

Routes are enumerated from the OpenAPI, so a new route is covered without touching this file.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

import api.routers.tasks  # noqa: F401 - its request models are StrictRequest subclasses too
from api.main import create_app
from api.schemas.common import StrictRequest
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.factories import candidate, event

ALL_ROLES = ("admin", "memory_writer", "approver", "operator", "auditor")
UNKNOWN_KEY = "mnemo_aaaaaaaaaaaa_" + "x" * 43
SOME_ID = "00000000-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def key(make_key: MakeKey) -> str:
    return make_key(roles=ALL_ROLES)


def _operations(client: TestClient) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in client.app.openapi()["paths"].items():  # type: ignore[attr-defined]
        for method, operation in methods.items():
            yield method.upper(), path, operation


def _url(path: str, **overrides: str) -> str:
    """The path with every parameter filled in (a well-formed id unless overridden)."""
    return re.sub(r"\{(\w+)\}", lambda m: overrides.get(m.group(1), SOME_ID), path)


def _refused(response: Any, operation: dict[str, Any], status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json", response.text
    assert response.json()["error"]["code"] == code, response.text
    assert str(status) in operation["responses"], f"{status} is not documented"


# --- timestamps ----------------------------------------------------------------------------------

POISON = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "1899-12-31T23:59:59Z", "2200-01-01T00:00:00Z"]


def _with_stamp(where: str, stamp: str) -> tuple[str, dict[str, Any]]:
    if where == "event.occurred_at":
        return "/memory-events", event(f"e-{uuid.uuid4()}", occurred_at=stamp)
    body = candidate(f"poison {uuid.uuid4()}")
    if where == "source.captured_at":
        body["source"]["captured_at"] = stamp
    else:
        body["validity"] = {where.split(".")[1]: stamp}
    return "/memory-candidates", body


STAMPED = ["event.occurred_at", "source.captured_at", "validity.observed_at", "validity.effective_from",
           "validity.effective_to", "validity.expires_at"]


@pytest.mark.parametrize("stamp", POISON)
@pytest.mark.parametrize("where", STAMPED)
def test_a_timestamp_out_of_range_is_refused(client: TestClient, key: str, where: str, stamp: str) -> None:
    """Finding 6: these were stored, and then every GET and recall meeting the memory was a 500."""
    path, body = _with_stamp(where, stamp)
    response = client.post(path, json=body, headers=auth(key))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "timestamp_out_of_range"
    assert "1900-01-01T00:00:00Z" in error["message"] and "2200-01-01T00:00:00Z" in error["message"]


@pytest.mark.parametrize("stamp", POISON[:2])
def test_a_correction_with_a_timestamp_out_of_range_is_refused(client: TestClient, key: str, stamp: str) -> None:
    written = client.post("/memory-candidates", json=candidate(f"to correct {uuid.uuid4()}"), headers=auth(key))
    memory_id = written.json()["memory_id"]
    body = {"expected_version": 1, "content": "corrected", "validity": {"expires_at": stamp}}
    response = client.patch(f"/memories/{memory_id}", json=body, headers=auth(key))
    assert response.status_code == 422 and response.json()["error"]["code"] == "timestamp_out_of_range"
    assert client.get(f"/memories/{memory_id}", headers=auth(key)).json()["version"] == 1


def test_the_bounds_themselves_are_stored_and_read_back(client: TestClient, key: str) -> None:
    marker = f"bounds{uuid.uuid4().hex[:8]}"
    body = candidate(f"{marker} 边界", validity={"effective_from": "1900-01-01T00:00:00Z",
                                                "expires_at": "2199-12-31T23:59:59+00:00"})
    body["source"]["captured_at"] = "1900-01-01T00:00:00+00:00"
    written = client.post("/memory-candidates", json=body, headers=auth(key))
    assert written.status_code == 201, written.text
    read = client.get(f"/memories/{written.json()['memory_id']}", headers=auth(key))
    assert read.status_code == 200 and read.json()["validity"]["expires_at"].startswith("2199-12-31T23:59:59")
    recall = client.post("/memory-query", json={"query": marker}, headers=auth(key))
    assert recall.status_code == 200, recall.text


def _strict_models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [StrictRequest]
    while pending:
        model = pending.pop()
        found.append(model)
        pending.extend(model.__subclasses__())
    return found


def test_every_timestamp_of_every_request_model_is_bounded() -> None:
    """Each datetime field of each request model (today's and tomorrow's) refuses year 9999 in UTC."""
    checked = []
    for model in _strict_models():
        for name, field in model.model_fields.items():
            if "datetime" not in repr(field.annotation).lower():
                continue
            checked.append(f"{model.__name__}.{name}")
            errors = []
            try:
                model.model_validate({name: "9999-12-31T23:59:59-14:00"})
            except Exception as exc:  # a ValidationError with one entry per problem
                errors = exc.errors()  # type: ignore[attr-defined]
            assert any(e["loc"] == (name,) and e["type"] == "timestamp_out_of_range" for e in errors), (
                f"{model.__name__}.{name} accepts a timestamp out of range: use api.schemas.Timestamp"
            )
    assert "SourceIn.captured_at" in checked and "EventIn.occurred_at" in checked and len(checked) >= 6


def test_a_report_month_outside_the_range_is_refused(client: TestClient, key: str) -> None:
    body = {"task_type": "monthly-report", "request_intent_id": "m", "goal": {"month": "0000-01", "currency": "EUR"}}
    response = client.post("/tasks", json=body, headers=auth(key))
    assert response.status_code == 422 and response.json()["error"]["fields"][0]["field"] == "goal.month"


# --- malformed characters, numbers and nesting, on every route -----------------------------------

BAD_BODIES = {
    "invalid_character": ['{"x": "a\\u0000b"}', '{"x": ["a\\ud800"]}', '{"\\u0000": 1}', '{"x": {"y": "\\udfff"}}'],
    "invalid_number": [
        '{"x": NaN}', '{"x": [Infinity]}', '{"x": -Infinity}', '{"x": 1e400}', '{"x": ' + "7" * 5000 + "}"
    ],
    "invalid_json": ['{"x": "caf\xe9"}'],  # sent as latin-1 below: not UTF-8
    "nesting_too_deep": ['{"x": ' + "[" * 100 + "]" * 100 + "}", "[" * 1000 + "]" * 1000, "[" * 5000],
}


def _post(client: TestClient, method: str, url: str, raw: str, headers: dict[str, str]) -> Any:
    body = raw.encode("latin-1") if "\xe9" in raw else raw.encode("utf-8", "surrogatepass")
    return client.request(method, url, content=body, headers={**headers, "content-type": "application/json"})


def test_every_body_is_guarded_on_every_route(client: TestClient, key: str) -> None:
    """Finding 7: a NUL, a lone surrogate, NaN / Infinity / 1e400 or deep nesting anywhere in a body (500s
    before); an integer of 5,000 digits or a body that is not UTF-8 (a bare 400 http_error before)."""
    covered = 0
    for method, path, operation in _operations(client):
        if method not in ("POST", "PUT", "PATCH"):
            continue
        for code, bodies in BAD_BODIES.items():
            for raw in bodies:
                _refused(_post(client, method, _url(path), raw, auth(key)), operation, 422, code)
        covered += 1
    assert covered >= 15


def test_every_query_and_path_parameter_is_guarded(client: TestClient, key: str) -> None:
    """A NUL in any query parameter or path id of any route (e.g. the audit trace_id)."""
    checked = set()
    for method, path, operation in _operations(client):
        headers = auth(key) if operation.get("security") else {}
        for parameter in operation.get("parameters", []):
            name = parameter["name"]
            # (A lone surrogate cannot arrive here: URLs carry UTF-8, and a percent-encoded one decodes to U+FFFD.)
            if parameter["in"] == "path":
                response = client.request(method, _url(path, **{name: "a%00b"}), headers=headers)
            else:
                response = client.request(method, _url(path), params={name: "a\x00b"}, headers=headers)
            _refused(response, operation, 422, "invalid_character")
            checked.add(f"{parameter['in']}.{name}")
        # A parameter nobody declared is still a string of the request.
        _refused(client.request(method, _url(path), params={"zz": "\x00"}, headers=headers),
                 operation, 422, "invalid_character")
    assert {"query.trace_id", "query.version", "query.deletion_request_id", "path.memory_id", "path.task_id"} <= checked


def test_the_findings_exact_requests(client: TestClient, key: str) -> None:
    """The probe's own reproductions, each a 500 with a plain-text body before."""
    h = auth(key)
    refused = client.post("/memory-candidates", json=candidate("a\x00b"), headers=h)
    assert refused.json()["error"]["code"] == "invalid_character"
    assert client.post("/memory-query", json={"query": "x", "project_id": "p\x00"}, headers=h).status_code == 422
    hold = client.post("/retention-holds", json={"user_id": "u\x00", "reason": "legal"}, headers=h)
    assert hold.json()["error"]["fields"][0]["field"] == "user_id"
    deletion = {"deletion_request_id": "d\x00", "scope": {"type": "subject", "user_id": "nobody"}}
    assert client.post("/deletion-requests", json=deletion, headers=h).json()["error"]["code"] == "invalid_character"
    task = {
        "task_type": "monthly-report",
        "request_intent_id": "i\x00",
        "goal": {"month": "2026-05", "currency": "EUR"},
    }
    created = client.post("/tasks", json=task, headers=h)
    assert created.status_code == 422 and created.json()["error"]["fields"][0]["field"] == "request_intent_id"
    payload = json.dumps(event("nan")).replace('"role": "user"', '"role": NaN')
    assert _post(client, "POST", "/memory-events", payload, h).json()["error"]["code"] == "invalid_number"
    surrogate = json.dumps(event("lone"), ensure_ascii=False).replace("我搬到杭州了", "\\ud800")
    assert _post(client, "POST", "/memory-events", surrogate, h).json()["error"]["code"] == "invalid_character"
    written = client.post("/memory-candidates", json=candidate(f"versions {uuid.uuid4()}"), headers=h).json()
    for version in (2**31, 2**63):
        response = client.get(f"/memories/{written['memory_id']}", params={"version": version}, headers=h)
        assert response.status_code == 422, response.text
    stale = client.patch(
        f"/memories/{written['memory_id']}", json={"expected_version": 2**31, "content": "c"}, headers=h
    )
    assert stale.status_code == 422, stale.text


def test_a_refused_body_stores_nothing(client: TestClient, key: str) -> None:
    marker = f"refused{uuid.uuid4().hex[:8]}"
    client.post("/memory-candidates", json=candidate(f"{marker} \x00"), headers=auth(key))
    body = json.dumps(candidate(f"{marker} nan", confidence=0.5)).replace("0.5", "NaN")
    _post(client, "POST", "/memory-candidates", body, auth(key))
    assert client.post("/memory-query", json={"query": marker}, headers=auth(key)).json()["items"] == []


# --- 401 before any 422 --------------------------------------------------------------------------


def test_401_wins_over_every_422_on_every_route(client: TestClient, key: str) -> None:
    """Finding 11: without a valid key the answer is 401, whatever else is wrong (it was a 422 on recall)."""
    bad_requests: list[tuple[str, dict[str, Any]]] = [
        ("unknown field", {"json": {"unknown_field": 1}}),
        ("wrong type", {"json": {"query": 5, "limit": "many"}}),
        ("invalid JSON", {"content": b"{not json", "headers": {"content-type": "application/json"}}),
        ("NUL", {"json": {"x": "\x00"}}),
        ("deep", {"content": b"[" * 2000, "headers": {"content-type": "application/json"}}),
        ("NUL in the query", {"params": {"limit": "\x00"}}),
        ("bad query value", {"params": {"limit": "-1", "version": "x", "owner": "nobody"}}),
    ]
    covered = 0
    for method, path, operation in _operations(client):
        if not operation.get("security"):
            continue
        covered += 1
        for label, request in bad_requests:
            if method not in ("POST", "PUT", "PATCH") and ("json" in request or "content" in request):
                continue
            for credentials in ({}, auth(UNKNOWN_KEY), {"Authorization": "Basic abc"}):
                headers = {**request.get("headers", {}), **credentials}
                response = client.request(
                    method, _url(path), headers=headers, **{k: v for k, v in request.items() if k != "headers"}
                )
                assert response.status_code == 401, f"{method} {path} {label}: {response.text}"
                assert response.headers["www-authenticate"] == "Bearer"
                _refused(response, operation, 401, "unauthorized")
    assert covered >= 25


def test_with_a_valid_key_the_same_bad_body_is_a_422(client: TestClient, key: str) -> None:
    for path in ("/memory-query", "/recall/render", "/memory-candidates"):
        response = client.post(path, json={"unknown_field": 1}, headers=auth(key))
        assert response.status_code == 422 and response.json()["error"]["code"] in ("unknown_field", "missing_field")


# --- the last resort -----------------------------------------------------------------------------


def test_an_unexpected_exception_is_a_json_500_that_shows_nothing_of_it(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(settings)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("(psycopg.errors.DataError) SELECT secret FROM memories WHERE content = 'my diary'")

    with TestClient(app, raise_server_exceptions=False) as client, caplog.at_level(logging.ERROR, "mnemo.api"):
        response = client.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "internal_error"
    assert error["request_id"] == response.headers["x-request-id"]
    assert "SELECT" not in response.text and "diary" not in response.text and "RuntimeError" not in response.text
    logged = [r for r in caplog.records if error["request_id"] in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log, only there


def test_a_task_error_never_shows_an_unexpected_exception_text() -> None:
    """A failed activity's SQL (and its parameters) became the task's ``error`` shown by GET /tasks/{id}."""
    from temporalio.exceptions import ActivityError, ApplicationError, RetryState

    from workflows.report_task import _cause_code

    def failed(cause: ApplicationError) -> ActivityError:
        error = ActivityError(
            "activity error",
            scheduled_event_id=5,
            started_event_id=6,
            identity="w",
            activity_type="create_task",
            activity_id="1",
            retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
        )
        error.__cause__ = cause
        return error

    sql = ApplicationError('(psycopg.DataError) INSERT INTO tasks (tenant_id) VALUES (%(tenant_id)s) '
                           "[parameters: {'request_intent_id': 'secret'}]", type="DataError")
    code, message = _cause_code(failed(sql))
    assert code == "activity_failed" and "DataError" in message and "create_task" in message
    assert "INSERT" not in message and "secret" not in message
    refusal = ApplicationError("no sales lines for 2026-05", type="no_data", non_retryable=True)
    assert _cause_code(failed(refusal)) == ("no_data", "no sales lines for 2026-05")


# --- the OpenAPI says what the API does ----------------------------------------------------------


def _request_schemas(document: dict[str, Any]) -> set[str]:
    """Names of the component schemas reachable from some request body."""
    schemas = document["components"]["schemas"]
    names: set[str] = set()
    pending = [op["requestBody"] for _, _, op in _ops(document) if "requestBody" in op]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.split("/")[-1] not in names:
                names.add(ref.split("/")[-1])
                pending.append(schemas[ref.split("/")[-1]])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return names


def _ops(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield method, path, operation


def test_openapi_never_offers_null_where_null_is_refused(client: TestClient) -> None:
    document = client.app.openapi()  # type: ignore[attr-defined]
    names = _request_schemas(document)
    assert {"CandidateIn", "ValidityIn", "RecallIn", "TaskCreateIn", "HoldIn"} <= names
    for name in names:
        for field, schema in document["components"]["schemas"][name].get("properties", {}).items():
            assert {"type": "null"} not in schema.get("anyOf", []), f"{name}.{field} offers null"
            assert schema.get("default", "") is not None, f"{name}.{field} defaults to null"
    for method, path, operation in _ops(document):
        for parameter in operation.get("parameters", []):
            assert "null" not in json.dumps(parameter["schema"]), f"{method} {path} {parameter['name']}"


def test_openapi_documents_the_error_responses(client: TestClient) -> None:
    document = client.app.openapi()  # type: ignore[attr-defined]
    assert "HTTPValidationError" not in json.dumps(document)
    error = {"$ref": "#/components/schemas/ErrorOut"}
    for method, path, operation in _ops(document):
        statuses = {"422", "431", "500"}
        if operation.get("security"):
            statuses |= {"401", "403", "404"} | ({"409"} if method != "get" else set())
        if method in ("post", "put", "patch"):
            statuses.add("413")
        assert statuses <= operation["responses"].keys(), f"{method} {path}"
        for status in statuses:
            assert operation["responses"][status]["content"]["application/json"]["schema"] == error
    assert document["paths"]["/memory-query"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in document["paths"]["/healthz"]["get"]


def test_405_names_the_allowed_methods(client: TestClient) -> None:
    """Finding 11: a 405 had no Allow header. Every path, every method it does not serve."""
    served: dict[str, set[str]] = {}
    for method, path, _ in _operations(client):
        served.setdefault(path, set()).add(method)
    for path in served:
        # A URL may match more than one template (``/resources/search`` is also ``/resources/{resource}``): it
        # is served the methods of every template it matches.
        url = _url(path)
        methods = set().union(*(more for other, more in served.items()
                                if re.fullmatch(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(other)), url)))
        for method in {"GET", "POST", "PUT", "PATCH", "DELETE"} - methods:
            response = client.request(method, url)
            assert response.status_code == 405, f"{method} {path}: {response.text}"
            allowed = set(response.headers["allow"].split(", "))
            assert allowed - {"HEAD", "OPTIONS"} == methods, f"{method} {path}: Allow {allowed}"
            assert response.json()["error"]["code"] == "method_not_allowed"
            assert set(response.json()["error"]["allowed"]) == allowed


# --- request headers -----------------------------------------------------------------------------


def test_request_headers_are_bounded(client: TestClient, key: str) -> None:
    """Finding 11: a 1 MB request header was accepted. 16 KiB of header fields in total; more is a 431."""
    for path in ("/healthz", "/memories/" + SOME_ID):
        response = client.get(path, headers={**auth(key), "X-Big": "a" * 1_000_000})
        assert response.status_code == 431 and response.json()["error"]["code"] == "headers_too_large"
        many = {f"X-Many-{i}": "b" * 200 for i in range(100)}  # no single line is large, together they are
        assert client.get(path, headers={**auth(key), **many}).status_code == 431
    assert client.get("/healthz", headers={"X-Fine": "c" * 12_000}).status_code == 200


# --- the schema's types mean what they say -------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/memory-query", {"query": "x", "explain": 0}),
        ("/memory-query", {"query": "x", "limit": "5"}),
        ("/memory-query", {"query": "x", "limit": True}),
        ("/memory-query", {"query": "x", "min_relevance": "0.5"}),
        ("/memory-query", {"query": "x", "min_revision": False}),
        ("/memory-events", event("zero", occurred_at=0)),
        ("/memory-candidates", candidate("x", confidence=True)),
        ("/report-data/sample", {"seed": False}),
    ],
)
def test_no_lax_coercion(client: TestClient, key: str, path: str, body: dict[str, Any]) -> None:
    """Found by a schemathesis run: 0 was taken for false, "5" and true for 5, 0 for 1970-01-01T00:00:00Z."""
    response = client.post(path, json=body, headers=auth(key))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] in ("invalid_value", "invalid_timestamp")


def test_json_integers_and_enums_still_parse(client: TestClient, key: str) -> None:
    """94.0 is an integer in JSON (and JSON Schema); enums and UUIDs arrive as strings."""
    body = {"query": "x", "limit": 5.0, "categories": ["PROFILE"], "spaces": ["USER"], "min_relevance": 1}
    assert client.post("/memory-query", json=body, headers=auth(key)).status_code == 200
    written = client.post("/memory-candidates", json=candidate(f"c {uuid.uuid4()}", confidence=1), headers=auth(key))
    assert written.status_code == 201, written.text
    scope = {"type": "memory", "memory_id": written.json()["memory_id"]}
    deletion = client.post("/deletion-requests", json={"deletion_request_id": f"d-{uuid.uuid4()}", "scope": scope},
                           headers=auth(key))
    assert deletion.status_code == 202, deletion.text


def test_openapi_uses_json_schema_keywords_and_documents_replays(client: TestClient) -> None:
    document = client.app.openapi()  # type: ignore[attr-defined]
    text = json.dumps(document)
    assert '"ge":' not in text and '"le":' not in text  # pydantic's names, not JSON Schema's
    for path in ("/memory-events", "/memory-candidates", "/tasks"):
        assert {"200", "201"} <= document["paths"][path]["post"]["responses"].keys(), path
    recall = document["components"]["schemas"]["RecallIn"]["properties"]
    assert recall["min_revision"]["maximum"] == 2**53 - 1 and recall["keys"]["items"]["pattern"] == "^[^\\u0000]*$"
    stamp = document["components"]["schemas"]["SourceIn"]["properties"]["captured_at"]
    assert stamp["format"] == "date-time" and stamp["pattern"] == "^(19|20|21)\\d\\d-"
