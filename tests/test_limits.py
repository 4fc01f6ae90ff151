"""One tenant cannot hold the API's slots (issue 12, finding 8): a recall limit per tenant, statement timeouts.

The limiter is the real one of the running app; the statement timeout is PostgreSQL's, hit by a
PATCH that waits for a row lock another connection holds.
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack

import psycopg
from fastapi.testclient import TestClient

from api.devstack.postgres import PostgresInfo
from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.factories import candidate


def test_a_tenant_over_its_recall_limit_gets_a_429_and_others_are_served(
    client: TestClient, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    busy, other = make_key(tenant=tenant), make_key()
    limiter = client.app.state.recall_limiter  # type: ignore[attr-defined]
    with ExitStack() as held:
        for _ in range(limiter.limit):  # as many recalls of the tenant in flight as it may have
            held.enter_context(limiter.slot(tenant))
        refused = client.post("/memory-query", json={"query": "上海"}, headers=auth(busy))
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "tenant_busy" and refused.headers["Retry-After"] == "1"
        assert client.post("/recall/render", json={"query": "上海"}, headers=auth(busy)).status_code == 429
        assert client.post("/memory-query", json={"query": "上海"}, headers=auth(other)).status_code == 200
    assert client.post("/memory-query", json={"query": "上海"}, headers=auth(busy)).status_code == 200


def test_a_statement_over_the_timeout_is_a_503_and_frees_its_connection(
    settings: Settings, postgres: PostgresInfo, make_key: MakeKey
) -> None:
    tight = settings.model_copy(update={"statement_timeout_seconds": 0.5})
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    with TestClient(create_app(tight)) as api:
        memory_id = api.post("/memory-candidates", json=candidate("locked for a while"), headers=auth(key)).json()[
            "memory_id"
        ]
        with psycopg.connect(postgres.conninfo()) as locker:
            locker.execute("SELECT 1 FROM memories WHERE memory_id = %s FOR UPDATE", (memory_id,))
            waited = api.patch(f"/memories/{memory_id}", json={"expected_version": 1, "content": "changed"},
                               headers=auth(key))
            assert waited.status_code == 503, waited.text
            assert waited.json()["error"]["code"] == "statement_timeout" and waited.headers["Retry-After"]
        changed = api.patch(f"/memories/{memory_id}", json={"expected_version": 1, "content": "changed"},
                            headers=auth(key))
        assert changed.status_code == 200, changed.text
