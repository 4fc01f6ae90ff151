"""Liveness and readiness against the real PostgreSQL and Temporal."""

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_checks_both_engines(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200, response.text
    assert response.json() == {"ready": True, "checks": {"postgres": "ok", "temporal": "ok"}}


def test_readyz_reports_an_unreachable_temporal(settings: Settings) -> None:
    broken = settings.model_copy(update={"temporal_address": "127.0.0.1:1"})
    with TestClient(create_app(broken)) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["postgres"] == "ok"
    assert response.json()["checks"]["temporal"].startswith("error")


def test_openapi_documents_the_endpoints(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/memory-events", "/memory-candidates", "/memory-query", "/memories/{memory_id}", "/readyz"):
        assert path in paths
