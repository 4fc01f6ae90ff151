"""JSON log lines: a request's line carries time, level, trace and span ids, request id, route and tenant;
never a memory's content or a key."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.main import create_app
from api.observability.logging import JsonFormatter
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.factories import candidate


@pytest.fixture()
def lines() -> Iterator[io.StringIO]:
    """Every line the process logs while the test runs, formatted as `mnemo api` formats them."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


def test_a_request_line_has_its_context_and_no_content_or_key(
    settings: Settings, spans: InMemorySpanExporter, make_key: MakeKey, lines: io.StringIO
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    secret_content = f"我的银行卡密码提示是{uuid.uuid4().hex[:8]}"
    with TestClient(create_app(settings)) as client:
        created = client.post("/memory-candidates", json=candidate(secret_content), headers=auth(key))
        assert created.status_code == 201
        read = client.get(f"/memories/{created.json()['memory_id']}", headers=auth(key))
        assert read.status_code == 200
    request_id = read.headers["x-request-id"]
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    finished = [r for r in records if r.get("request_id") == request_id and r["message"] == "request finished"]
    assert len(finished) == 1, records
    line = finished[0]
    assert line["level"] == "info" and line["logger"] == "mnemo.request"
    assert line["time"].endswith("+00:00")
    assert (line["route"], line["method"], line["status"], line["tenant_id"]) == (
        "/memories/{memory_id}", "GET", 200, tenant
    )
    assert len(line["trace_id"]) == 32 and len(line["span_id"]) == 16
    everything = lines.getvalue()
    assert secret_content not in everything and secret_content.encode("unicode_escape").decode() not in everything
    assert key not in everything and key.split("_", 1)[1] not in everything


def test_a_failed_request_line_names_the_id_the_client_got(
    settings: Settings, make_key: MakeKey, lines: io.StringIO
) -> None:
    """An unknown route still gets a line with the request id its answer carries."""
    with TestClient(create_app(settings)) as client:
        missing = client.get("/no-such-route", headers=auth(make_key()))
    assert missing.status_code == 404
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    [line] = [r for r in records if r.get("request_id") == missing.headers["x-request-id"]]
    assert (line["route"], line["status"]) == ("unmatched", 404)
