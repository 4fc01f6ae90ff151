"""Published knowledge as a resource type (issue 27 §3): list and search show ACTIVE versions only, read by id
shows the item's newest version and its status; another tenant's item reads as a missing one. Real PostgreSQL,
the reader's routes, and MCP's ``read`` over a real uvicorn."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi.testclient import TestClient
from sqlalchemy import Engine, update

from memory.db import tenant_session
from memory.knowledge.models import KnowledgeItem
from tests.conftest import MakeKey, auth
from tests.knowledge.published import POLICY, open_candidate, published
from tests.mcp.conftest import data_of, mcp_session, mcp_url  # noqa: F401 - the served API, a fixture used by name
from tests.resources.test_adapters import found, listed, read, refs

NOW = datetime.now(UTC)


def _tenant(make_key: MakeKey) -> tuple[str, str]:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    return tenant, make_key(tenant=tenant)


async def test_knowledge_is_listed_searched_and_read_as_published(
    client: TestClient, engine: Engine, make_key: MakeKey, mcp_url: str,  # noqa: F811 - the fixture imported above
) -> None:
    tenant, key = _tenant(make_key)
    published(engine, tenant, {**POLICY, "claim": "报告发布前须经部门主管审批"}, NOW)
    policy = published(engine, tenant, POLICY, NOW)
    runbook = published(engine, tenant, {"key": "ops.restart", "claim": "重启服务前先摘除负载均衡流量",
                                         "authority": "P1", "source_refs": ["doc:runbook#1"]}, NOW)
    withdrawn = published(engine, tenant, {"key": "ops.old", "claim": "审批单可以事后补交", "authority": "P2",
                                           "source_refs": ["ticket:T-9"]}, NOW)
    open_candidate(engine, tenant, {"claim": "报告发布审批可以跳过", "authority": "P3",
                                    "source_refs": ["session:s-1"]}, NOW)
    with tenant_session(engine, tenant) as session:
        session.execute(update(KnowledgeItem).where(KnowledgeItem.knowledge_id == withdrawn.knowledge_id)
                        .values(status="WITHDRAWN"))
    ref = f"knowledge:{policy.knowledge_id}"

    assert refs(listed(client, key, "knowledge")) == {ref, f"knowledge:{runbook.knowledge_id}"}
    assert refs(listed(client, key, "knowledge", authority="P1")) == {f"knowledge:{runbook.knowledge_id}"}
    # The superseded v1 and the candidate say "审批" too: only the ACTIVE version is a record.
    assert refs(found(client, key, "报告发布 审批", "knowledge")) == {ref}
    page = read(client, key, ref)
    assert page.status_code == 200, page.text
    data = page.json()["data"]
    assert (data["version"], data["status"], data["claim"], data["supersedes_version"]) == (
        2, "ACTIVE", "报告发布前必须获得财务审批", 1)
    assert data["scope"] == {"type": "TENANT"} and data["source_refs"] == ["doc:finance/handbook#4.2"]
    gone = read(client, key, f"knowledge:{withdrawn.knowledge_id}").json()["data"]
    assert (gone["status"], gone["version"]) == ("WITHDRAWN", 1)  # read by id says what became of it

    _, stranger = _tenant(make_key)
    foreign, missing = read(client, stranger, ref), read(client, stranger, f"knowledge:{uuid.uuid4()}")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["error"]["code"] == missing.json()["error"]["code"]
    assert listed(client, stranger, "knowledge") == []

    async with mcp_session(mcp_url, key) as (session, _):
        over_mcp = data_of(await session.call_tool("read", {"ref": ref}))
    assert over_mcp["data"] == data
    assert client.get("/resources/knowledge", headers=auth(make_key(tenant=tenant, roles=("public_client",)))
                      ).status_code == 404  # internal only, as mnemo's other own types
