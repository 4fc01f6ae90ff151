"""Seed 003 §12, end to end: resuming the monthly report that waits for approval, the bundle carries the approved
policy "报告发布前必须获得财务审批" (published knowledge, v4 after three superseded versions) in ``knowledge``, the
warning not to publish, and ``knowledge_version`` in its version vector; the superseded v3 the query matches is a
warning only. Real API, PostgreSQL, a real report task on Temporal, MCP's ``search_memories`` over uvicorn.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from memory.recall.bundle import WAITING_FOR_APPROVAL
from tests.conftest import auth
from tests.knowledge.published import POLICY, published
from tests.mcp.conftest import data_of, mcp_session, mcp_url  # noqa: F401 - the served API, a fixture used by name
from tests.recall.conftest import recall
from tests.tasks.conftest import (
    Team,
    awaiting_approval,
    task_worker,  # noqa: F401 - the real worker, a fixture every test uses (pytestmark)
    team,  # noqa: F401 - a tenant with sales data and an owner, approver and colleague
)

pytestmark = pytest.mark.usefixtures("task_worker")
QUERY = "继续上次的月度报告，现在可以发布吗？"
EARLIER = ["报告发布前须经部门主管同意", "报告发布前须经部门主管与财务同意", "报告发布前须经财务经理口头同意"]


async def test_resuming_the_report_carries_the_approved_policy_and_the_warning_not_to_publish(
    client: TestClient, engine: Engine, mcp_url: str, team: Team,  # noqa: F811 - fixtures imported above
) -> None:
    now = datetime.now(UTC)
    for claim in EARLIER:
        published(engine, team.tenant, {**POLICY, "claim": claim}, now)
    policy = published(engine, team.tenant, POLICY, now)
    assert (policy.version, policy.supersedes_version) == (4, 3)
    task = awaiting_approval(client, team.owner)

    bundle = recall(client, team.owner, query=QUERY, intent="RESUME_TASK", task_id=task["task_id"])
    assert bundle["task_state"]["status"] == "WAITING_FOR_APPROVAL"
    assert [(k["knowledge_id"], k["version"], k["claim"], k["authority"]) for k in bundle["knowledge"]] == [
        (str(policy.knowledge_id), 4, "报告发布前必须获得财务审批", "P0")]
    assert bundle["knowledge"][0]["key"] == "report.publish_policy"
    assert bundle["knowledge"][0]["source_refs"] == ["doc:finance/handbook#4.2"]
    assert WAITING_FOR_APPROVAL in bundle["warnings"]
    # The superseded versions the query matches are warnings naming what replaced them, never facts.
    superseded = [w for w in bundle["warnings"] if str(policy.knowledge_id) in w]
    assert any("report.publish_policy v3 " in w and "superseded by v4" in w for w in superseded)
    assert all(k["version"] == 4 for k in bundle["knowledge"])
    vector = bundle["version_vector"]
    assert vector["knowledge_version"] == 4 and vector[f"knowledge:{policy.knowledge_id}"] == 4
    assert vector["task_state_version"] == task["state_version"]

    rendered = client.post("/recall/render", json={"query": QUERY, "intent": "RESUME_TASK",
                                                    "task_id": task["task_id"]}, headers=auth(team.owner)).json()
    text = rendered["text"]
    assert '<knowledge title="正式知识 / knowledge">' in text and "报告发布前必须获得财务审批</fact>" in text
    assert text.index("<warnings>") < text.index("<knowledge")
    events = client.get("/recall/audit", params={"trace_id": rendered["trace_id"]}, headers=auth(team.operator))
    assert events.status_code == 200, events.text
    assert f"knowledge:{policy.knowledge_id}@4" in events.json()["events"][0]["selected_refs"]

    async with mcp_session(mcp_url, team.owner) as (session, _):
        found = data_of(await session.call_tool("search_memories", {"query": QUERY, "intent": "RESUME_TASK",
                                                                    "task_id": task["task_id"]}))
    assert [(k["knowledge_id"], k["version"]) for k in found["knowledge"]] == [(str(policy.knowledge_id), 4)]
    assert WAITING_FOR_APPROVAL in found["warnings"] and any("superseded by v4" in w for w in found["warnings"])
