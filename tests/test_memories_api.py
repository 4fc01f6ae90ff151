"""Memories through the API: activation rules, confirmation, reads and the supersede chain."""

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.factories import candidate


def test_writer_with_stated_evidence_is_active_at_once(client: TestClient, make_key: MakeKey) -> None:
    response = client.post("/memory-candidates", json=candidate("我住在上海"), headers=auth(make_key()))
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["version"], body["status"], body["stage"]) == (1, "ACTIVE", "searchable")


def test_without_writer_role_it_stays_a_candidate(client: TestClient, make_key: MakeKey) -> None:
    response = client.post("/memory-candidates", json=candidate("喜欢喝茶"), headers=auth(make_key(roles=())))
    assert response.json()["status"] == "CANDIDATE"


def test_model_inference_is_never_active_whoever_sends_it(client: TestClient, make_key: MakeKey) -> None:
    admin = make_key(roles=("admin",))
    response = client.post(
        "/memory-candidates", json=candidate("用户可能是工程师", source_level="E4"), headers=auth(admin)
    )
    assert response.json()["status"] == "CANDIDATE"
    confirm = client.post(f"/memory-candidates/{response.json()['memory_id']}/confirm", headers=auth(admin))
    assert confirm.status_code == 409
    assert confirm.json()["error"]["code"] == "inference_not_confirmable"


def test_confirm_turns_a_candidate_active(client: TestClient, make_key: MakeKey) -> None:
    tenant = "t-confirm"
    reader = make_key(tenant=tenant, user="bob", roles=())
    writer = make_key(tenant=tenant, user="bob", roles=("memory_writer",))
    created = client.post("/memory-candidates", json=candidate("bob 喜欢绿茶"), headers=auth(reader)).json()
    refused = client.post(f"/memory-candidates/{created['memory_id']}/confirm", headers=auth(reader))
    assert refused.status_code == 403
    confirmed = client.post(f"/memory-candidates/{created['memory_id']}/confirm", headers=auth(writer))
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["status"] == "ACTIVE"
    read = client.get(f"/memories/{created['memory_id']}", headers=auth(writer)).json()
    assert read["validity"]["last_confirmed_at"] is not None
    again = client.post(f"/memory-candidates/{created['memory_id']}/confirm", headers=auth(writer))
    assert again.json()["error"]["code"] == "not_a_candidate"


def test_read_returns_provenance_kept_apart_from_storage_time(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    body = candidate("偏好 Markdown", category="PREFERENCE", key="output.format")
    body["source"]["evidence_refs"] = ["msg-17"]
    created = client.post("/memory-candidates", json=body, headers=auth(key)).json()
    read = client.get(f"/memories/{created['memory_id']}", headers=auth(key)).json()
    assert read["source"] == {
        "source_id": "conv-1",
        "source_type": "EXPLICIT_USER_STATEMENT",
        "captured_at": "2026-06-01T09:00:00Z",
        "evidence_refs": ["msg-17"],
    }
    assert read["stored_at"] > "2026-11-01"
    assert (read["owner_id"], read["category"], read["key"], read["abstract"]) == (
        "alice",
        "PREFERENCE",
        "output.format",
        "偏好 Markdown",
    )
    assert read["history"] == [{"version": 1, "status": "ACTIVE", "stored_at": read["stored_at"]}]


def test_correction_supersedes_and_never_edits(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    created = client.post("/memory-candidates", json=candidate("我住在上海"), headers=auth(key)).json()
    url = f"/memories/{created['memory_id']}"
    v2 = client.patch(url, json={"expected_version": 1, "content": "我住在杭州"}, headers=auth(key))
    assert v2.status_code == 200, v2.text
    assert (v2.json()["version"], v2.json()["status"], v2.json()["supersedes_version"]) == (2, "ACTIVE", 1)
    v3 = client.patch(url, json={"expected_version": 2, "content": "我住在苏州"}, headers=auth(key)).json()
    assert v3["version"] == 3
    head = client.get(url, headers=auth(key)).json()
    assert (head["version"], head["content"]) == (3, "我住在苏州")
    history = [(h["version"], h["status"]) for h in head["history"]]
    assert history == [(1, "SUPERSEDED"), (2, "SUPERSEDED"), (3, "ACTIVE")]
    v1 = client.get(url, params={"version": 1}, headers=auth(key)).json()
    assert (v1["content"], v1["status"]) == ("我住在上海", "SUPERSEDED")
    # The old value is no longer recalled; the new one is.
    assert client.post("/memory-query", json={"query": "上海"}, headers=auth(key)).json()["items"] == []
    found = client.post("/memory-query", json={"query": "苏州"}, headers=auth(key)).json()["items"]
    assert [(i["memory_id"], i["version"]) for i in found] == [(created["memory_id"], 3)]


def test_stale_expected_version_is_a_conflict_carrying_the_current_version(
    client: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    created = client.post("/memory-candidates", json=candidate("周报周五发"), headers=auth(key)).json()
    url = f"/memories/{created['memory_id']}"
    corrected = client.patch(url, json={"expected_version": 1, "content": "周报周四发"}, headers=auth(key))
    assert corrected.status_code == 200
    stale = client.patch(url, json={"expected_version": 1, "content": "周报周三发"}, headers=auth(key))
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "version_conflict"
    assert stale.json()["error"]["details"] == {"current_version": 2}
    assert client.get(url, headers=auth(key)).json()["content"] == "周报周四发"


def test_correcting_needs_the_writer_role(client: TestClient, make_key: MakeKey) -> None:
    reader = make_key(roles=())
    created = client.post("/memory-candidates", json=candidate("喜欢咖啡"), headers=auth(reader)).json()
    response = client.patch(
        f"/memories/{created['memory_id']}", json={"expected_version": 1, "content": "喜欢茶"}, headers=auth(reader)
    )
    assert response.status_code == 403


def test_candidate_idempotency(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    body = candidate("每天九点站会", idempotency_key="cand-1")
    first = client.post("/memory-candidates", json=body, headers=auth(key))
    again = client.post("/memory-candidates", json=body, headers=auth(key))
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["memory_id"] == first.json()["memory_id"]
    assert again.json()["replayed"] is True
    different = client.post(
        "/memory-candidates", json=candidate("每天十点站会", idempotency_key="cand-1"), headers=auth(key)
    )
    assert different.status_code == 409


def test_space_and_category_rules(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    wrong = client.post("/memory-candidates", json=candidate("重试三次", category="PATTERN"), headers=auth(key))
    assert wrong.json()["error"]["code"] == "category_space_mismatch"
    no_agent = client.post(
        "/memory-candidates", json=candidate("重试三次", category="PATTERN", space="AGENT"), headers=auth(key)
    )
    assert no_agent.json()["error"]["code"] == "agent_credential_required"
    agent_key = make_key(agent="report-agent")
    ok = client.post(
        "/memory-candidates", json=candidate("重试三次", category="PATTERN", space="AGENT"), headers=auth(agent_key)
    )
    assert ok.status_code == 201
    tenant_wide = client.post("/memory-candidates", json=candidate("公司规定", space="TENANT"), headers=auth(key))
    assert tenant_wide.status_code == 403
    session = client.post("/memory-candidates", json=candidate("这次会话", space="SESSION"), headers=auth(key))
    assert session.json()["error"]["code"] == "session_id_required"
