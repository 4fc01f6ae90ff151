"""Bad input gets a typed 422 (or 401) and nothing is written."""

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, update

from memory.db import global_session
from memory.models import ApiKey
from tests.conftest import MakeKey, auth
from tests.factories import candidate


@pytest.fixture
def key(make_key: MakeKey) -> str:
    return make_key()


def _code(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 422, response.text
    return str(response.json()["error"]["code"])


def test_unknown_key(client: TestClient, key: str) -> None:
    answer = client.post("/memory-candidates", json=candidate("x", colour="red"), headers=auth(key))
    assert _code(answer) == "unknown_field"


def test_unknown_nested_key(client: TestClient, key: str) -> None:
    body = candidate("x")
    body["source"]["trust_me"] = True
    response = client.post("/memory-candidates", json=body, headers=auth(key))
    assert _code(response) == "unknown_field"
    assert response.json()["error"]["fields"][0]["field"] == "source.trust_me"


def test_explicit_null(client: TestClient, key: str) -> None:
    response = client.post("/memory-candidates", json=candidate("x", key=None), headers=auth(key))
    assert _code(response) == "null_not_allowed"
    assert "key" in response.json()["error"]["message"]


@pytest.mark.parametrize("stamp", ["yesterday", "2026-13-01T00:00:00Z", "2026-06-01T09:00:00", "2026-06-01"])
def test_invalid_or_zoneless_timestamp(client: TestClient, key: str, stamp: str) -> None:
    body = candidate("x")
    body["source"]["captured_at"] = stamp
    assert _code(client.post("/memory-candidates", json=body, headers=auth(key))) == "invalid_timestamp"


def test_duplicate_keys(client: TestClient, key: str) -> None:
    raw = '{"query": "上海", "query": "杭州"}'
    response = client.post(
        "/memory-query", content=raw, headers={**auth(key), "content-type": "application/json"}
    )
    assert _code(response) == "duplicate_key"


@pytest.mark.parametrize("field", ["tenant_id", "user_id", "roles"])
def test_identity_in_the_body_is_refused(client: TestClient, key: str, field: str) -> None:
    response = client.post("/memory-candidates", json=candidate("x", **{field: "someone-else"}), headers=auth(key))
    assert _code(response) == "identity_from_credentials"


def test_invalid_json(client: TestClient, key: str) -> None:
    response = client.post(
        "/memory-query", content="{not json", headers={**auth(key), "content-type": "application/json"}
    )
    assert _code(response) == "invalid_json"


def test_rejected_writes_store_nothing(client: TestClient, key: str) -> None:
    client.post("/memory-candidates", json=candidate("拒绝的写入 金丝雀", colour="red"), headers=auth(key))
    client.post("/memory-candidates", json=candidate("拒绝的写入 金丝雀", key=None), headers=auth(key))
    assert client.post("/memory-query", json={"query": "金丝雀"}, headers=auth(key)).json()["items"] == []


@pytest.mark.parametrize(
    "header", [None, "Basic abc", "Bearer ", "Bearer mnemo_short", "Bearer mnemo_aaaaaaaaaaaa_" + "x" * 43]
)
def test_missing_or_bad_credentials_are_401(client: TestClient, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = client.post("/memory-query", json={"query": "x"}, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_a_tampered_secret_is_401(client: TestClient, key: str) -> None:
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    assert client.post("/memory-query", json={"query": "x"}, headers=auth(tampered)).status_code == 401


def test_recall_answers_401_before_judging_the_request(client: TestClient, key: str) -> None:
    """Recall checks the key late (in the bundle's transaction), but a bad key is still the first answer."""
    unknown = "mnemo_aaaaaaaaaaaa_" + "x" * 43
    body = {"query": "x", "intent": "RESUME_TASK"}  # the key's tasks are looked up only once the key is known
    assert client.post("/memory-query", json=body, headers=auth(unknown)).status_code == 401
    resumed = client.post("/memory-query", json=body, headers=auth(key))
    assert resumed.status_code == 200 and resumed.json()["task_candidates"] == []


@pytest.mark.parametrize("path", ["/memory-query", "/recall/render"])
def test_recall_refuses_a_revoked_key(client: TestClient, engine: Engine, key: str, path: str) -> None:
    """Recall checks the key inside the bundle's own transaction: a key revoked a moment ago is a 401."""
    assert client.post(path, json={"query": "x"}, headers=auth(key)).status_code == 200
    with global_session(engine) as session:
        session.execute(update(ApiKey).where(ApiKey.key_id == key.split("_")[1]).values(revoked_at=func.now()))
    response = client.post(path, json={"query": "x"}, headers=auth(key))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
