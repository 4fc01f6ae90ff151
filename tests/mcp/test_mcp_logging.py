"""An MCP request's JSON log line names its tenant, as a REST request's does (the key the SDK checked says it)."""

from __future__ import annotations

import io
import json
import uuid

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey
from tests.mcp.test_strict_calls import HEADERS, INITIALIZE
from tests.observability.test_logging import lines  # noqa: F401 - the fixture, used by name


def test_an_mcp_request_line_names_the_keys_tenant(settings: Settings, make_key: MakeKey,
                                                   lines: io.StringIO) -> None:  # noqa: F811
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    with TestClient(create_app(settings)) as client:
        opened = client.post("/mcp", content=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {key}"})
    assert opened.status_code == 200, opened.text
    request_id = opened.headers["x-request-id"]
    finished = [record for record in map(json.loads, lines.getvalue().splitlines())
                if record.get("request_id") == request_id and record["message"] == "request finished"]
    assert len(finished) == 1 and finished[0]["tenant_id"] == tenant, finished
    assert key not in lines.getvalue()
