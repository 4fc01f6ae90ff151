"""RESUME_TASK without a task_id (issue 26 item 6, seed 003 §14.2): the caller's resumable tasks are found from the
key's identity. One → its live state; several → listed, and the agent is told to ask, never guess; none → said so.

Real API, real PostgreSQL, a real task worker on Temporal; MCP's ``search_memories`` over a real uvicorn.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.schemas.recall import RESUME_SECTIONS
from memory.recall.bundle import NO_TASK, SEVERAL_TASKS, WAITING_FOR_APPROVAL
from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, error_of, mcp_session, mcp_url  # noqa: F401 - the served API, a fixture used by name
from tests.recall.conftest import recall, write
from tests.tasks.conftest import (
    Team,
    approve,
    awaiting_approval,
    status_is,
    task_worker,  # noqa: F401 - the real worker, a fixture every test uses (pytestmark)
    team,  # noqa: F401 - a tenant with sales data and an owner, approver and colleague
    wait_for,
)

SEED = "继续上次报告，这次不要 Markdown，直接用纯文本告诉我进度"
"""Seed 003 §14.2, said in a new session."""
FMT = "response.output_format"

pytestmark = pytest.mark.usefixtures("task_worker")


def resume(client: TestClient, key: str, query: str = "where was I", **body: Any) -> dict[str, Any]:
    return recall(client, key, query=query, intent="RESUME_TASK", **body)


def candidate_ids(bundle: dict[str, Any]) -> list[str]:
    return [task["task_id"] for task in bundle["task_candidates"]]


def test_several_are_listed_without_a_choice_then_the_only_one_left_is_resumed(
    client: TestClient, make_key: MakeKey, team: Team  # noqa: F811 - the fixture imported above
) -> None:
    first, second, third = (awaiting_approval(client, team.owner) for _ in range(3))
    several = resume(client, team.owner)
    assert candidate_ids(several) == [third["task_id"], second["task_id"], first["task_id"]]  # newest first
    assert several["task_state"] is None and several["needs_task_choice"] is True
    assert SEVERAL_TASKS in several["warnings"] and WAITING_FOR_APPROVAL not in several["warnings"]
    listed = several["task_candidates"][0]
    assert listed == {"task_id": third["task_id"], "task_type": "monthly-report", "status": "WAITING_FOR_APPROVAL",
                      "waiting_reason": listed["waiting_reason"], "updated_at": listed["updated_at"],
                      "goal_summary": "currency CNY, month 2026-06"}
    rendered = client.post("/recall/render", json={"query": "where was I", "intent": "RESUME_TASK"},
                           headers=auth(team.owner)).json()["text"]
    assert "<task_candidates>" in rendered and third["task_id"] in rendered and "<task_state" not in rendered

    # A finished task and a cancelled one are no longer resumable: the one left is chosen, with its live state.
    assert approve(client, team.approver, first).status_code == 200
    wait_for(client, team.owner, first["task_id"], status_is("SUCCEEDED"))
    assert client.post(f"/tasks/{second['task_id']}/cancel", headers=auth(team.owner)).status_code == 200
    wait_for(client, team.owner, second["task_id"], status_is("CANCELLED"))
    one = resume(client, team.owner)
    assert candidate_ids(one) == [third["task_id"]] and one["needs_task_choice"] is False
    assert one["task_state"] == {"task_id": third["task_id"], "status": "WAITING_FOR_APPROVAL",
                                 "current_step_id": third["current_step_id"], "state_version": third["state_version"],
                                 "waiting_reason": third["waiting_reason"], "published": False}
    assert WAITING_FOR_APPROVAL in one["warnings"] and SEVERAL_TASKS not in one["warnings"]
    assert one["version_vector"]["task_state_version"] == third["state_version"]

    # Another user's tasks are never listed nor chosen, whoever asks: a colleague, or the tenant's admin.
    for key in (team.other_user, make_key(tenant=team.tenant, user="ada", roles=("admin",))):
        none = resume(client, key)
        assert none["task_candidates"] == [] and none["task_state"] is None and none["needs_task_choice"] is False
        assert NO_TASK in none["warnings"] and third["task_id"] not in str(none)


def test_the_seeds_sentence_in_a_new_session_resumes_in_plain_text_for_this_request_only(
    client: TestClient, team: Team  # noqa: F811 - the fixture imported above
) -> None:
    markdown = write(client, team.owner, "markdown", category="PREFERENCE", key=FMT)
    task = awaiting_approval(client, team.owner)
    bundle = resume(client, team.owner, SEED, session_id=f"s-{uuid.uuid4().hex[:8]}")
    assert bundle["intent"] == "RESUME_TASK"
    assert bundle["task_state"]["task_id"] == task["task_id"]
    assert bundle["task_state"]["status"] == "WAITING_FOR_APPROVAL" and bundle["task_state"]["published"] is False
    assert WAITING_FOR_APPROVAL in bundle["warnings"]  # "do not publish"
    assert bundle["request_constraints"] == [{"key": FMT, "value": "plain_text", "source": "CURRENT_REQUEST"}]
    assert bundle["effective_preferences"][FMT] == "plain_text"
    [decision] = [d for d in bundle["conflict_decisions"] if d["key"] == FMT]
    assert decision["winner"] == "CURRENT_REQUEST" and decision["persistent_change"] is False
    assert decision["suppressed_ref"]["memory_id"] == markdown

    # The body's own constraint wins over what the sentence says; and the stored preference never changed.
    asked = resume(client, team.owner, SEED, request_constraints={FMT: "markdown"})
    assert asked["request_constraints"] == [{"key": FMT, "value": "markdown", "source": "CURRENT_REQUEST"}]
    stored = client.get(f"/memories/{markdown}", headers=auth(team.owner)).json()
    assert stored["version"] == 1 and stored["content"] == "markdown"
    later = recall(client, team.owner, query="写一份周报")
    assert later["effective_preferences"][FMT] == "markdown"
    assert later["preference_sources"][FMT]["memory_id"] == markdown and later["request_constraints"] == []


async def test_mcp_search_memories_gives_the_same_resume_sections_as_rest(
    client: TestClient, mcp_url: str, team: Team  # noqa: F811 - fixtures imported above
) -> None:
    write(client, team.owner, "markdown", category="PREFERENCE", key=FMT)
    first = awaiting_approval(client, team.owner)

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        rest = resume(client, team.owner, SEED)
        async with mcp_session(mcp_url, team.owner) as (session, _):
            mcp = data_of(await session.call_tool("search_memories", {"query": SEED, "intent": "RESUME_TASK"}))
        return {s: rest[s] for s in RESUME_SECTIONS}, {s: mcp[s] for s in RESUME_SECTIONS}

    rest, mcp = await both()
    assert mcp == rest and rest["task_state"]["task_id"] == first["task_id"]
    assert rest["effective_preferences"][FMT] == "plain_text" and WAITING_FOR_APPROVAL in rest["warnings"]
    second = awaiting_approval(client, team.owner)
    rest, mcp = await both()
    assert mcp == rest and rest["needs_task_choice"] is True and rest["task_state"] is None
    assert candidate_ids(rest) == [second["task_id"], first["task_id"]]
    async with mcp_session(mcp_url, team.other_user) as (session, _):
        colleague = data_of(await session.call_tool("search_memories", {"query": SEED, "intent": "RESUME_TASK"}))
        named = error_of(await session.call_tool("search_memories", {"query": SEED, "intent": "RESUME_TASK",
                                                                     "task_id": first["task_id"]}))
    assert colleague["task_candidates"] == [] and NO_TASK in colleague["warnings"]
    assert named["code"] == "not_found"  # as REST answers a colleague's task: the same as a missing one
