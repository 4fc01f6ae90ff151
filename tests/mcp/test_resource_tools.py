"""The MCP tools over the resource reader, through the official client: the catalog each audience is
offered, ``list()`` (the directory of the caller's grants), and who may call at all."""

from __future__ import annotations

import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp.shared.exceptions import MCPError
from sqlalchemy import Engine

from memory.db import global_session
from memory.identity.keys import key_id_of, revoke_key
from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, error_of, mcp_session

INTERNAL_TOOLS = {"list", "search", "read", "browse_memory_categories", "search_memories", "get_memory_detail"}
PUBLIC_TYPES = {"episode", "calendar", "todo", "voice_memo", "contact"}


async def test_an_internal_key_is_offered_the_six_tools_with_their_schemas(mcp_url: str, make_key: MakeKey) -> None:
    async with mcp_session(mcp_url, make_key()) as (session, _):
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == INTERNAL_TOOLS
    assert set(tools["list"].input_schema["properties"]) == {"resource", "filters", "cursor"}
    assert set(tools["search"].input_schema["properties"]) == {"query", "resource", "top_k"}
    assert tools["search"].input_schema["required"] == ["query"]
    assert set(tools["read"].input_schema["properties"]) == {"ref", "cursor"}
    assert set(tools["search_memories"].input_schema["properties"]) == {"query", "category", "top_k", "intent",
                                                                         "task_id"}
    assert tools["get_memory_detail"].input_schema["required"] == ["memory_id"]
    assert tools["browse_memory_categories"].input_schema["properties"] == {}
    for tool in tools.values():
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", tool.name
        assert tool.description
    read_output = tools["read"].output_schema or {}
    assert set(read_output["properties"]) >= {"ref", "complete", "data", "fragments", "next_cursor"}


async def test_list_without_a_resource_is_the_directory_of_the_callers_grants(
    mcp_url: str, make_key: MakeKey, client: TestClient
) -> None:
    key = make_key()
    async with mcp_session(mcp_url, key) as (session, _):
        directory = data_of(await session.call_tool("list", {}))
    assert directory["audience"] == "internal" and directory["run_id"] is None
    rest = client.get("/resources", headers=auth(key)).json()["resources"]
    # Without a run or a policy the grants are the audience's ceiling: what GET /resources declares.
    assert {entry["type"]: entry["fields"] for entry in directory["resources"]} == {
        entry["type"]: sorted(entry["fields"]) for entry in rest
    }
    assert all(set(entry["operations"]) <= {"list", "search", "read"} for entry in directory["resources"])


async def test_a_public_key_sees_the_public_catalog_only(mcp_url: str, make_key: MakeKey) -> None:
    async with mcp_session(mcp_url, make_key(roles=("public_client",))) as (session, _):
        names = {tool.name for tool in (await session.list_tools()).tools}
        directory = data_of(await session.call_tool("list", {}))
        refused = error_of(await session.call_tool("browse_memory_categories", {}))
        detail = error_of(await session.call_tool("get_memory_detail", {"memory_id": "x"}))
    assert names == {"list", "search", "read"}
    assert directory["audience"] == "public"
    assert {entry["type"] for entry in directory["resources"]} == PUBLIC_TYPES
    assert refused["code"] == detail["code"] == "tool_not_available"


async def test_an_unknown_tool_is_tool_not_available_naming_the_available_ones(
    mcp_url: str, make_key: MakeKey
) -> None:
    async with mcp_session(mcp_url, make_key()) as (session, _):
        error = error_of(await session.call_tool("list_todos", {}))  # a legacy tool, switched off
    assert error["code"] == "tool_not_available"
    assert set(error["available"]) == INTERNAL_TOOLS and "'list_todos'" in error["message"]


async def test_a_request_without_a_valid_key_is_refused_401(mcp_url: str, make_key: MakeKey) -> None:
    opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "probe", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=10) as http:
        missing = await http.post(mcp_url, json=opening, headers=headers)
        wrong = await http.post(mcp_url, json=opening, headers={**headers, "Authorization": "Bearer mnemo_nope"})
        key = make_key()
        right = await http.post(mcp_url, json=opening, headers={**headers, "Authorization": f"Bearer {key}"})
        sse = {"Accept": "text/event-stream"}
        stream = await http.get(mcp_url, headers=sse)
        keyed_stream = await http.get(mcp_url, headers={**sse, "Authorization": f"Bearer {key}"})
    assert missing.status_code == wrong.status_code == stream.status_code == 401
    assert keyed_stream.status_code == 405 and keyed_stream.headers["allow"] == "POST, DELETE"
    assert missing.json()["error"] == "invalid_token" and "mcp-session-id" not in missing.headers
    assert right.status_code == 200 and right.json()["result"]["serverInfo"]["name"] == "mnemo"


async def test_bad_arguments_get_mnemos_typed_errors_before_any_handler(mcp_url: str, make_key: MakeKey) -> None:
    async with mcp_session(mcp_url, make_key()) as (session, _):
        misspelt = error_of(await session.call_tool("search", {"query": "x", "topk": 3}))
        too_many = error_of(await session.call_tool("search_memories", {"query": "x", "top_k": 0}))
        missing = error_of(await session.call_tool("read", {}))
        wrong_type = error_of(await session.call_tool("list", {"filters": {"status": 1}}))
    assert misspelt["code"] == "unknown_field" and misspelt["unknown"] == ["topk"]
    assert "it takes: query, resource, top_k" in misspelt["message"]
    assert too_many["code"] == "invalid_value" and too_many["argument"] == "top_k"
    assert missing["code"] == "invalid_value" and "'ref' is a required property" in missing["message"]
    assert wrong_type["code"] == "invalid_value" and wrong_type["argument"] == "filters/status"


async def test_a_key_revoked_between_two_calls_is_refused_at_the_next(
    mcp_url: str, make_key: MakeKey, engine: Engine
) -> None:
    key = make_key()
    async with mcp_session(mcp_url, key) as (session, _):
        assert data_of(await session.call_tool("list", {}))["resources"]
        with global_session(engine) as db:
            revoke_key(db, key_id_of(key), actor="test")
        with pytest.raises(MCPError):
            await session.call_tool("list", {})
