"""list / search / read over REST as a run reads (seed 000 §3): its access is the snapshot ∩ the agent's current
policy ∩ the ceiling, recomputed for every request — the seed's todo example with real policies and runs, and a
permission narrowed or revoked between two pages of one read."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.resources.reader_support import error, new_key, put, run_headers, set_policy, tenant


def _search(client: TestClient, headers: dict[str, str], query: str) -> list[dict[str, Any]]:
    response = client.post("/resources/search", json={"query": query}, headers=headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def test_the_seeds_todo_example_with_real_policies_and_runs(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    owner, admin = new_key(make_key, tenant_id), new_key(make_key, tenant_id, user="root", roles=("admin",))
    runtime = new_key(make_key, tenant_id, roles=("agent_runtime",))
    put(client, owner, "todo:push", {"title": "更新推送配置", "status": "open", "notes": "联系人电话 13800001111"})
    set_policy(client, admin, "agent-a", "todo", ["/title", "/status"])
    set_policy(client, admin, "agent-b", "todo", ["/title", "/status", "/notes"])
    agent_a, agent_b = run_headers(client, runtime, "agent-a"), run_headers(client, runtime, "agent-b")

    assert _search(client, agent_a, "13800001111") == []
    assert [hit["ref"] for hit in _search(client, agent_b, "13800001111")] == ["todo:push"]
    hit_a = _search(client, agent_a, "推送配置 13800001111")
    assert [hit["ref"] for hit in hit_a] == ["todo:push"] and "1380000" not in str(hit_a)
    read_a = client.post("/resources/read", json={"ref": "todo:push"}, headers=agent_a).json()
    assert read_a["data"] == {"title": "更新推送配置", "status": "open"}
    listed = client.get("/resources/todo", headers=agent_a).json()["items"]
    assert [item["data"] for item in listed] == [{"title": "更新推送配置", "status": "open"}]
    # A filter on a field the run may read narrows; one on a field it may not read is refused, not dropped.
    assert len(client.get("/resources/todo", params={"status": "done"}, headers=agent_a).json()["items"]) == 0
    assert error(client.get("/resources/todo", params={"priority": "high"}, headers=agent_a), 422) \
        == "filter_not_readable"


def test_a_permission_narrowed_or_revoked_between_two_pages_stops_the_next(
    client: TestClient, make_key: MakeKey,
) -> None:
    tenant_id = tenant()
    owner, admin = new_key(make_key, tenant_id), new_key(make_key, tenant_id, user="root", roles=("admin",))
    runtime = new_key(make_key, tenant_id, roles=("agent_runtime",))
    put(client, owner, "transcript:long", {"title": "评审录音", "text": "逐字记录。" * 40_000})
    fields = ["/title", "/text"]
    set_policy(client, admin, "reader", "transcript", fields)
    run = run_headers(client, runtime, "reader")

    first = client.post("/resources/read", json={"ref": "transcript:long"}, headers=run).json()
    assert first["complete"] is False and first["next_cursor"]
    set_policy(client, admin, "reader", "transcript", ["/title"])  # narrowed: the next page is refused
    narrowed = client.post("/resources/read", json={"ref": "transcript:long", "cursor": first["next_cursor"]},
                           headers=run)
    assert error(narrowed, 409) == "permissions_changed"

    set_policy(client, admin, "reader", "transcript", fields)  # restored: the same cursor reads on
    second = client.post("/resources/read", json={"ref": "transcript:long", "cursor": first["next_cursor"]},
                         headers=run)
    assert second.status_code == 200, second.text
    assert client.delete("/policies/reader/transcript", headers=auth(admin)).status_code == 200
    revoked = client.post("/resources/read", json={"ref": "transcript:long", "cursor": second.json()["next_cursor"]},
                          headers=run)
    assert error(revoked, 404) == "unknown_resource"
    assert "transcript" not in [entry["type"] for entry in client.get("/resources", headers=run).json()["resources"]]
