"""Reading through MCP with the official client: search, then read a long transcript page by page to the end,
each answer the JSON REST gives; a run's access (snapshot ∩ policy ∩ ceiling) from the ``X-Mnemo-Run`` header,
recomputed for every call; the legacy tools over the same reader."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from memory.resources.pages import reassemble
from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, error_of, mcp_session
from tests.resources.reader_support import put
from tests.resources.test_reader_read import long_text
from tests.workers import served

TODO = {"title": "更新推送配置", "status": "open", "notes": "联系内线 8123 的值班同学"}


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


async def test_search_then_read_a_long_transcript_to_completion(
    mcp_url: str, make_key: MakeKey, client: TestClient
) -> None:
    key = make_key()
    transcript = {"title": "移动端提醒评审 · 全文", "text": long_text(120_000)}
    put(client, key, "transcript:review", transcript)
    put(client, key, "todo:push", TODO)
    pages: list[dict[str, Any]] = []
    async with mcp_session(mcp_url, key) as (session, _):
        found = data_of(await session.call_tool("search", {"query": "推送配置", "top_k": 5}))
        todo = data_of(await session.call_tool("read", {"ref": "todo:push"}))
        cursor: str | None = None
        while True:
            arguments = {"ref": "transcript:review"} | ({"cursor": cursor} if cursor else {})
            answer = await session.call_tool("read", arguments)
            page = data_of(answer)
            text = answer.content[0]
            assert text.type == "text" and len(text.text.encode()) <= 65_536
            # The very bytes REST sends for the same page (the reader measured those against the budget).
            assert text.text.encode() == client.post("/resources/read", json=arguments, headers=auth(key)).content
            pages.append(page)
            cursor = page["next_cursor"]
            assert page["complete"] is (cursor is None)
            if cursor is None:
                break
    assert "todo:push" in [hit["ref"] for hit in found["items"]]
    rest_search = client.post("/resources/search", json={"query": "推送配置", "top_k": 5}, headers=auth(key)).json()
    assert [hit["ref"] for hit in found["items"]] == [hit["ref"] for hit in rest_search["items"]]
    assert todo == client.post("/resources/read", json={"ref": "todo:push"}, headers=auth(key)).json()
    assert todo["complete"] is True and todo["data"] == TODO
    assert len(pages) >= 4 and reassemble(pages) == transcript


async def test_a_runs_access_comes_from_its_header_and_a_revocation_applies_to_the_next_call(
    mcp_url: str, make_key: MakeKey, client: TestClient
) -> None:
    tenant = _tenant()
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    runtime = make_key(tenant=tenant, roles=("agent_runtime",))
    put(client, make_key(tenant=tenant), "todo:push", TODO)
    policy = {"operations": ["list", "search", "read"], "fields": ["/title", "/status"]}
    assert client.put("/policies/planner/todo", json=policy, headers=auth(admin)).status_code == 200
    started = client.post("/runs", json={"thread_id": "th-1", "agent_id": "planner"}, headers=auth(runtime))
    assert started.status_code == 201, started.text
    run = started.json()["run_id"]
    async with mcp_session(mcp_url, runtime, {"X-Mnemo-Run": run}) as (session, _):
        directory = data_of(await session.call_tool("list", {}))
        by_title = data_of(await session.call_tool("search", {"query": "推送"}))
        by_notes = data_of(await session.call_tool("search", {"query": "8123"}))
        assert client.delete("/policies/planner/todo", headers=auth(admin)).status_code == 200
        after = data_of(await session.call_tool("list", {}))
        refused = error_of(await session.call_tool("read", {"ref": "todo:push"}))
    async with mcp_session(mcp_url, runtime) as (no_run, _):
        missing_run = error_of(await no_run.call_tool("list", {}))
    assert directory["run_id"] == run
    assert [(e["type"], e["fields"]) for e in directory["resources"]] == [("todo", ["/status", "/title"])]
    assert [hit["ref"] for hit in by_title["items"]] == ["todo:push"]
    assert by_notes["items"] == []  # a keyword only in a field the run may not read is no candidate
    assert after["resources"] == []
    assert refused["code"] == "unknown_resource"
    rest = client.get("/resources", headers=auth(runtime))
    assert missing_run["code"] == rest.json()["error"]["code"]  # the same refusal as REST without a run


async def test_the_legacy_tools_answer_what_the_reader_answers(
    settings: Settings, make_key: MakeKey, client: TestClient
) -> None:
    key = make_key()
    put(client, key, "todo:push", TODO)
    put(client, key, "todo:done", {"title": "关闭旧通道", "status": "done"})
    put(client, key, "transcript:review", {"title": "评审", "text": "我们先上线兜底。"})
    with served(create_app(settings.model_copy(update={"mcp_legacy_tools": True}))) as port:
        async with mcp_session(f"http://127.0.0.1:{port}/mcp", key) as (session, _):
            open_todos = data_of(await session.call_tool("list_todos", {"status": "open"}))
            same = data_of(await session.call_tool("list", {"resource": "todo", "filters": {"status": "open"}}))
            transcript = data_of(await session.call_tool("get_transcript", {"transcript_id": "review"}))
            searched = data_of(await session.call_tool("search_memory", {"query": "兜底"}))
            recordings = data_of(await session.call_tool("list_recordings", {}))
    assert [item["ref"] for item in open_todos["items"]] == ["todo:push"] and open_todos == same
    assert transcript["data"] == {"title": "评审", "text": "我们先上线兜底。"} and transcript["complete"] is True
    assert [hit["ref"] for hit in searched["items"]] == ["transcript:review"]
    assert recordings == {"items": [], "next_cursor": None}


async def test_a_runs_memory_tools_need_the_whole_memory_type_in_its_access(
    mcp_url: str, make_key: MakeKey, client: TestClient
) -> None:
    tenant = _tenant()
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    runtime = make_key(tenant=tenant, roles=("agent_runtime",))
    every_field = client.get("/resources", headers=auth(make_key(tenant=tenant))).json()["resources"]
    memory_fields = next(entry["fields"] for entry in every_field if entry["type"] == "memory")
    policies = {"todo-only": ("todo", ["/title", "/status"]), "whole": ("memory", memory_fields),
                "narrow": ("memory", ["/abstract", "/category"])}
    answers: dict[str, dict[str, Any]] = {}
    for agent, (resource, fields) in policies.items():
        body = {"operations": ["list", "search", "read"], "fields": fields}
        assert client.put(f"/policies/{agent}/{resource}", json=body, headers=auth(admin)).status_code == 200
        run = client.post("/runs", json={"thread_id": "th", "agent_id": agent}, headers=auth(runtime)).json()["run_id"]
        async with mcp_session(mcp_url, runtime, {"X-Mnemo-Run": run}) as (session, _):
            answers[agent] = (await session.call_tool("browse_memory_categories", {})).model_dump()
    assert answers["todo-only"]["structured_content"]["error"]["code"] == "unknown_resource"
    assert not answers["whole"]["is_error"] and len(answers["whole"]["structured_content"]["categories"]) == 8
    narrowed = answers["narrow"]["structured_content"]["error"]
    assert narrowed["code"] == "memory_fields_narrowed" and "/abstract, /category" in narrowed["message"]
