"""Liveness and readiness against the real PostgreSQL and Temporal, and typed 503s when either is down."""

import time
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from httpx2 import Response  # what TestClient answers with since the mcp SDK brought httpx2
from sqlalchemy import Engine

from api.devstack.processes import free_port
from api.devstack.temporal import TemporalDevServer
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth
from tests.workers import ThreadWorker

A_WELL_FORMED_KEY = "mnemo_abcdefghijkl_" + "x" * 43


@pytest.fixture(scope="module")
def own_queue(settings: Settings) -> Settings:
    """Settings with a task queue of this module's own, so which workers poll it is up to the test."""
    return settings.model_copy(update={"task_queue": f"readyz-{uuid.uuid4().hex[:8]}"})


@pytest.fixture(scope="module")
def worker(own_queue: Settings, engine: Engine) -> Iterator[ThreadWorker]:
    running = ThreadWorker(own_queue, engine, own_queue.task_queue).start()
    yield running
    running.stop()


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_the_root_sends_a_browser_to_the_console_and_tells_an_api_client_where_things_are(client: TestClient) -> None:
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"
    redirected = client.get("/", headers={"Accept": browser}, follow_redirects=False)
    assert redirected.status_code == 307 and redirected.headers["location"] == "/console/"
    for accept in ("application/json", "*/*"):
        answer = client.get("/", headers={"Accept": accept})
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        assert answer.json() == {
            "service": "mnemo", "console": "/console/", "docs": "/docs", "openapi": "/openapi.json",
            "health": "/healthz", "ready": "/readyz", "metrics": "/metrics", "mcp": "/mcp",
        }
        assert all(client.get(path).status_code != 404 for path in ("/docs", "/openapi.json", "/healthz"))


def _ready(client: TestClient, timeout: float = 15.0) -> Response:
    """/readyz until 200 (a worker that just started may not have polled both halves of its queue yet)."""
    deadline = time.monotonic() + timeout
    while True:
        response: Response = client.get("/readyz")
        if response.status_code == 200 or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def test_readyz_names_each_dependency_and_is_ready_with_a_polling_worker(
    own_queue: Settings, worker: ThreadWorker
) -> None:
    with TestClient(create_app(own_queue)) as client:
        response = _ready(client)
    assert response.status_code == 200, response.text
    checks = response.json()["checks"]
    assert response.json()["ready"] is True
    assert checks["database"] == {"state": "ok"}
    assert checks["temporal"] == {"state": "ok"}
    assert checks["worker"]["state"] == "ok"
    assert checks["worker"]["pollers"]["workflow"] >= 1 and checks["worker"]["pollers"]["activity"] >= 1
    assert "demo_data" not in checks  # only under `mnemo dev` with its demo


def test_readyz_is_not_ready_without_a_worker(settings: Settings) -> None:
    nobody = settings.model_copy(update={"task_queue": f"nobody-{uuid.uuid4().hex[:8]}"})
    with TestClient(create_app(nobody)) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    checks = response.json()["checks"]
    assert checks["database"]["state"] == "ok" and checks["temporal"]["state"] == "ok"
    assert checks["worker"]["state"] == "unavailable"
    assert nobody.task_queue in checks["worker"]["error"]


def test_readyz_waits_for_the_sample_data_it_advertises(
    own_queue: Settings, worker: ThreadWorker, engine: Engine, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)  # creates the tenant
    demo = own_queue.model_copy(update={"ready_sample_data_tenant": tenant})
    with TestClient(create_app(demo)) as client:
        loading = client.get("/readyz")
        assert loading.status_code == 503, loading.text
        assert loading.json()["checks"]["demo_data"]["state"] == "loading"
        with tenant_session(engine, tenant) as session:
            seed_sales(session, tenant, total=200)
        ready = _ready(client)
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["demo_data"] == {"state": "ok", "tenant": tenant}


def test_readyz_reports_an_unreachable_temporal(settings: Settings) -> None:
    broken = settings.model_copy(update={"temporal_address": "127.0.0.1:1"})
    with TestClient(create_app(broken)) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["state"] == "ok"
    assert checks["temporal"]["state"] == "unavailable" and checks["temporal"]["error"]
    assert checks["worker"]["state"] == "unknown"


def test_a_database_that_is_down_is_a_typed_503_with_retry_after(settings: Settings) -> None:
    down = settings.model_copy(update={"database_url": f"postgresql+psycopg://postgres:pw@127.0.0.1:{free_port()}/mnemo"})
    with TestClient(create_app(down), raise_server_exceptions=False) as client:
        ready = client.get("/readyz")
        written = client.post(
            "/memory-candidates",
            json={"category": "PROFILE", "space": "USER", "content": "x",
                  "source": {"source_id": "s", "source_type": "TEST", "captured_at": "2026-06-01T00:00:00Z"},
                  "source_level": "E2"},
            headers=auth(A_WELL_FORMED_KEY),
        )
        recalled = client.post("/memory-query", json={"query": "x"}, headers=auth(A_WELL_FORMED_KEY))
    assert ready.status_code == 503 and ready.json()["checks"]["database"]["state"] == "unavailable"
    for response in (written, recalled):
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.headers["retry-after"] == "5"
        assert response.json()["error"]["code"] == "database_unavailable"


def test_a_temporal_that_cannot_be_reached_is_a_typed_503_with_retry_after(
    settings: Settings, make_key: MakeKey
) -> None:
    key = make_key(roles=("operator",))
    broken = settings.model_copy(update={"temporal_address": "127.0.0.1:1"})
    job = uuid.uuid4()
    with TestClient(create_app(broken), raise_server_exceptions=False) as client:
        task = client.get(f"/tasks/{uuid.uuid4()}", headers=auth(key))
        created = client.post(
            "/tasks",
            json={
                "task_type": "monthly-report",
                "request_intent_id": "i-1",
                "goal": {"month": "2026-06", "currency": "CNY"},
            },
            headers=auth(key),
        )
        assert client.get(f"/memory-deletions/{job}", headers=auth(key)).status_code == 404  # no Temporal needed
    for response in (task, created):
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "5"
        assert response.json()["error"]["code"] == "temporal_unavailable"


def test_a_temporal_that_goes_down_after_connecting_is_a_typed_503(
    settings: Settings, make_key: MakeKey, tmp_path_factory: pytest.TempPathFactory
) -> None:
    server = TemporalDevServer(
        tmp_path_factory.mktemp("temporal-down"), port=free_port(), ui_port=None, namespace="mnemo"
    )
    server.start()
    try:
        server.wait_ready()
        own = settings.model_copy(update={"temporal_address": server.address})
        key = make_key(roles=("operator",))
        with TestClient(create_app(own), raise_server_exceptions=False) as client:
            assert client.get("/readyz").json()["checks"]["temporal"] == {"state": "ok"}  # connected
            server.stop()
            task = client.get(f"/tasks/{uuid.uuid4()}", headers=auth(key))
            ready = client.get("/readyz")
    finally:
        server.stop()
    assert task.status_code == 503, task.text
    assert task.headers["retry-after"] == "5"
    assert task.json()["error"]["code"] == "temporal_unavailable"
    assert ready.status_code == 503 and ready.json()["checks"]["temporal"]["state"] == "unavailable"


def test_openapi_documents_the_endpoints(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/memory-events", "/memory-candidates", "/memory-events:batch", "/memory-candidates:batch",
                 "/memory-query", "/memories/{memory_id}", "/readyz"):
        assert path in paths
