"""Issue 23 finding 5 through MCP (the tools share the reader with REST): a run whose policy reads a todo's title
only gets the same search hit for an open and a done todo — no state, no score apart — as REST does."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, mcp_session
from tests.resources.reader_support import put


async def test_a_withheld_status_shows_in_no_mcp_search_hit(mcp_url: str, make_key: MakeKey, client: TestClient
                                                            ) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    runtime = make_key(tenant=tenant, roles=("agent_runtime",))
    owner = make_key(tenant=tenant)
    put(client, owner, "todo:a", {"title": "季度报告 review", "status": "open"})
    put(client, owner, "todo:b", {"title": "季度报告 review", "status": "cancelled"})
    policy = {"operations": ["list", "search", "read"], "fields": ["/title"]}
    assert client.put("/policies/planner/todo", json=policy, headers=auth(admin)).status_code == 200
    run = client.post("/runs", json={"thread_id": "th-1", "agent_id": "planner"}, headers=auth(runtime)).json()
    async with mcp_session(mcp_url, runtime, {"X-Mnemo-Run": run["run_id"]}) as (session, _):
        found = data_of(await session.call_tool("search", {"query": "季度报告 review"}))
    hits = found["items"]
    assert [hit["ref"] for hit in hits] == ["todo:a", "todo:b"]
    assert {hit["state"] for hit in hits} == {"withheld"} and hits[0]["score"] == hits[1]["score"]
    rest = client.post("/resources/search", json={"query": "季度报告 review"},
                       headers={**auth(runtime), "X-Mnemo-Run": run["run_id"]})
    assert rest.json() == found
