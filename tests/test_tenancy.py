"""Another tenant's object is indistinguishable from a missing one; RLS is the second wall."""

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.exc import ProgrammingError

from memory.db import tenant_session
from tests.conftest import MakeKey, auth
from tests.factories import candidate


@pytest.fixture
def foreign_memory(client: TestClient, make_key: MakeKey) -> tuple[str, str]:
    """(memory id owned by tenant A, admin key of tenant B)."""
    owner = make_key(roles=("admin",))
    created = client.post(
        "/memory-candidates", json=candidate("机密：A 公司的报价", source_level="E4"), headers=auth(owner)
    )
    return created.json()["memory_id"], make_key(roles=("admin",))


def _requests(memory_id: str) -> list[tuple[str, str, dict | None]]:  # type: ignore[type-arg]
    return [
        ("GET", f"/memories/{memory_id}", None),
        ("GET", f"/memories/{memory_id}?version=1", None),
        ("PATCH", f"/memories/{memory_id}", {"expected_version": 1, "content": "x"}),
        ("POST", f"/memory-candidates/{memory_id}/confirm", None),
    ]


def test_every_endpoint_answers_a_foreign_id_exactly_like_a_missing_one(
    client: TestClient, foreign_memory: tuple[str, str]
) -> None:
    memory_id, other_tenant = foreign_memory
    missing = str(uuid.uuid4())
    for (method, url, body), (_, missing_url, _) in zip(_requests(memory_id), _requests(missing), strict=True):
        foreign = client.request(method, url, json=body, headers=auth(other_tenant))
        absent = client.request(method, missing_url, json=body, headers=auth(other_tenant))
        assert foreign.status_code == absent.status_code == 404, (method, url)
        assert foreign.json()["error"]["code"] == absent.json()["error"]["code"] == "not_found"
        assert foreign.json()["error"]["message"].replace(memory_id, "ID") == absent.json()["error"][
            "message"
        ].replace(missing, "ID")


def test_a_malformed_id_is_the_same_404(client: TestClient, make_key: MakeKey) -> None:
    response = client.get("/memories/not-a-uuid", headers=auth(make_key()))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_query_never_crosses_tenants(client: TestClient, make_key: MakeKey) -> None:
    a, b = make_key(), make_key()
    client.post("/memory-candidates", json=candidate("跨租户测试 独角兽"), headers=auth(a))
    assert client.post("/memory-query", json={"query": "独角兽"}, headers=auth(b)).json()["items"] == []
    assert len(client.post("/memory-query", json={"query": "独角兽"}, headers=auth(a)).json()["items"]) == 1


def test_rls_hides_every_row_without_tenant_context(engine: Engine, client: TestClient, make_key: MakeKey) -> None:
    client.post("/memory-candidates", json=candidate("RLS 可见性"), headers=auth(make_key()))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT current_user")).scalar_one() == "mnemo_app"
        for table in ("memories", "memory_search", "memory_events", "principals"):
            assert connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() == 0, table


def test_rls_shows_only_the_context_tenant_even_without_a_filter(
    engine: Engine, client: TestClient, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    client.post("/memory-candidates", json=candidate("只属于这个租户"), headers=auth(key))
    client.post("/memory-candidates", json=candidate("别的租户"), headers=auth(make_key()))
    with tenant_session(engine, tenant) as session:
        tenants = session.execute(text("SELECT DISTINCT tenant_id FROM memories")).scalars().all()
    assert tenants == [tenant]


def test_rls_refuses_a_write_into_another_tenant(engine: Engine, make_key: MakeKey) -> None:
    make_key(tenant="t-rls-a")
    make_key(tenant="t-rls-b")
    with pytest.raises(ProgrammingError, match="row-level security"), tenant_session(engine, "t-rls-a") as session:
        session.execute(text("INSERT INTO principals (tenant_id, user_id) VALUES ('t-rls-b', 'mallory')"))
