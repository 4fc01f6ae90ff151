"""A public_client key (an external MCP client's) reads the public resource catalog and nothing else: every other
route that takes a key refuses it with a 403 naming what it may use, whatever other roles the key holds."""

from __future__ import annotations

import re
import uuid

from fastapi.testclient import TestClient

from api.deps import PUBLIC_READS
from tests.conftest import MakeKey, auth
from tests.resources.reader_support import new_key, put, tenant

SOME_ID = str(uuid.uuid4())


def test_a_public_key_is_refused_everywhere_but_the_public_catalog(client: TestClient, make_key: MakeKey) -> None:
    public = new_key(make_key, roles=("public_client", "memory_writer", "approver", "operator", "auditor"))
    operations = [(method.upper(), path, operation)
                  for path, methods in client.app.openapi()["paths"].items()  # type: ignore[attr-defined]
                  for method, operation in methods.items()]
    refused = 0
    for method, path, operation in operations:
        if "security" not in operation or (method, path) in PUBLIC_READS:
            continue
        url = re.sub(r"\{(\w+)\}", lambda m: "todo" if m.group(1) == "resource" else SOME_ID, path)
        response = client.request(method, url, headers=auth(public), json=None if method == "GET" else {})
        assert response.status_code == 403, f"{method} {path}: {response.status_code} {response.text[:200]}"
        assert "public_client key reads the public resource catalog only" in response.json()["error"]["message"]
        refused += 1
    assert refused >= 40  # every route of memories, sessions, tasks, deletions, records, runs, policies, recall


def test_a_public_key_reads_the_public_catalog(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    own = new_key(make_key, tenant_id)
    put(client, own, "todo:t1", {"title": "更新推送配置", "status": "open", "notes": "内部"})
    public = new_key(make_key, tenant_id, roles=("public_client",))
    assert client.get("/resources", headers=auth(public)).json()["audience"] == "public"
    items = client.get("/resources/todo", headers=auth(public)).json()["items"]
    assert [item["ref"] for item in items] == ["todo:t1"] and "notes" not in items[0]["data"]
    hits = client.post("/resources/search", json={"query": "推送配置"}, headers=auth(public)).json()["items"]
    assert [hit["ref"] for hit in hits] == ["todo:t1"]
    read = client.post("/resources/read", json={"ref": "todo:t1"}, headers=auth(public)).json()
    assert read["data"] == {"title": "更新推送配置", "status": "open"}
