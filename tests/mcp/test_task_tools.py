"""The agent protocol's MCP tools (issue 26, item 2) are the REST routes: the same service, the same answers and the
same errors, over the official client against the real app; internal keys only."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, error_of, mcp_session
from tests.tasks.agent_steps import STEP, collect, running_task, waiting_task


def _rest_error(response: Any) -> dict[str, Any]:
    """REST's error as an MCP tool error carries it: the details beside the code and the message."""
    error: dict[str, Any] = response.json()["error"]
    return {"code": error["code"], "message": error["message"], **error.get("details", {})}


async def test_an_agent_performs_its_step_over_mcp_as_over_rest(
    mcp_url: str, client: TestClient, settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant, user="alice", roles=("agent_runtime",))
    stranger = make_key(user="alice", roles=("admin",))
    artifact = {"name": "digest.md", "media_type": "text/markdown",
                "content_base64": base64.b64encode(b"# Digest\n").decode()}
    task, early = waiting_task(settings, engine, tenant), running_task(settings, engine, tenant)
    path = f"/tasks/{task.ref.task_id}/attempts"
    async with mcp_session(mcp_url, key) as (session, _):
        refused = error_of(await session.call_tool("claim_task_step", {"task_id": early.ref.task_id}))
        rest = client.post(f"/tasks/{early.ref.task_id}/attempts", headers=auth(key))
        assert refused == _rest_error(rest) and refused["code"] == "no_step_ready"

        claimed = data_of(await session.call_tool("claim_task_step", {"task_id": task.ref.task_id,
                                                                      "lease_seconds": 60}))
        assert (claimed["step_id"], claimed["attempt_number"]) == (STEP, 1)
        assert claimed["input"] == {"goal": {"month": "2026-06", "currency": "CNY"}, "artifacts": []}
        attempt = {"task_id": task.ref.task_id, "attempt_id": claimed["attempt_id"]}
        held = error_of(await session.call_tool("claim_task_step", {"task_id": task.ref.task_id}))
        assert held == _rest_error(client.post(path, headers=auth(key)))
        beat = data_of(await session.call_tool("heartbeat_task_attempt", attempt))
        assert beat["lease_expires_at"] >= claimed["lease_expires_at"]

        bad = {**artifact, "content_base64": "!!"}
        invalid = error_of(await session.call_tool("complete_task_attempt", {**attempt, "artifacts": [bad]}))
        rest_invalid = client.post(f"{path}/{claimed['attempt_id']}/complete", json={"artifacts": [bad]},
                               headers=auth(key))
        assert invalid == _rest_error(rest_invalid) and invalid["code"] == "invalid_base64"

        done = data_of(await session.call_tool("complete_task_attempt", {**attempt, "artifacts": [artifact],
                                                                           "output": {"items": 1}}))
        assert done["status"] == "SUCCEEDED" and done["replayed"] is False
        again = client.post(f"{path}/{claimed['attempt_id']}/complete",
                        json={"artifacts": [artifact], "output": {"items": 1}}, headers=auth(key))
        assert again.status_code == 200 and again.json() == {**done, "replayed": True}
    assert collect(engine, task).output == {"items": 1}

    async with mcp_session(mcp_url, stranger) as (session, _):  # another tenant's task: a missing one's answer
        theirs = error_of(await session.call_tool("claim_task_step", {"task_id": task.ref.task_id}))
        nothing = error_of(await session.call_tool("claim_task_step", {"task_id": str(uuid.uuid4())}))
        assert theirs["code"] == nothing["code"] == "not_found"
        assert theirs == _rest_error(client.post(path, headers=auth(stranger)))


async def test_a_public_client_is_not_offered_the_task_tools(mcp_url: str, make_key: MakeKey) -> None:
    async with mcp_session(mcp_url, make_key(roles=("public_client",))) as (session, _):
        listed = {tool.name for tool in (await session.list_tools()).tools}
        refused = error_of(await session.call_tool("claim_task_step", {"task_id": str(uuid.uuid4())}))
    assert not listed & {"claim_task_step", "heartbeat_task_attempt", "complete_task_attempt", "fail_task_attempt"}
    assert refused["code"] == "tool_not_available"
