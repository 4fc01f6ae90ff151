"""Seed 004 §9.3's memory tools over real memories written through the API: browse categories (L0) →
search (L1, mnemo's recall) → detail (L2), each only over what the caller's key may see."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, error_of, mcp_session


def _remember(client: TestClient, key: str, category: str, content: str, **extra: Any) -> str:
    body = {"category": category, "space": "USER", "content": content, "source_level": "E2",
            "source": {"source_id": f"chat-{uuid.uuid4().hex[:6]}", "source_type": "EXPLICIT_USER_STATEMENT",
                       "captured_at": "2026-06-01T09:00:00Z", "evidence_refs": ["msg-7"]}, **extra}
    response = client.post("/memory-candidates", json=body, headers=auth(key))
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "ACTIVE"
    memory_id: str = response.json()["memory_id"]
    return memory_id


async def test_browse_counts_and_abstracts_only_the_callers_usable_memories(
    mcp_url: str, make_key: MakeKey, client: TestClient
) -> None:
    tenant = _tenant()
    alice, bob = make_key(tenant=tenant), make_key(tenant=tenant, user="bob")
    _remember(client, alice, "PROFILE", "我住在上海", abstract="住在上海")
    _remember(client, alice, "PREFERENCE", "回答请用中文", abstract="偏好中文回答")
    _remember(client, alice, "PREFERENCE", "代码评审偏好极简风格", abstract="编码风格：极简")
    _remember(client, bob, "PROFILE", "Bob lives in Berlin", abstract="lives in Berlin")
    async with mcp_session(mcp_url, alice) as (session, _):
        overview = data_of(await session.call_tool("browse_memory_categories", {}))
    by_category = {entry["category"]: entry for entry in overview["categories"]}
    assert list(by_category) == ["PROFILE", "PREFERENCE", "ENTITY", "EVENT", "CASE", "PATTERN", "TOOL_EXPERIENCE",
                                 "SKILL_EXECUTION"]
    assert by_category["PROFILE"] == {"category": "PROFILE", "count": 1, "abstract": "住在上海"}
    assert by_category["PREFERENCE"]["count"] == 2
    assert set(by_category["PREFERENCE"]["abstract"].split("; ")) == {"偏好中文回答", "编码风格：极简"}
    assert by_category["EVENT"] == {"category": "EVENT", "count": 0, "abstract": ""}
    assert "Berlin" not in str(overview)


async def test_search_goes_through_recall_and_detail_returns_the_whole_memory(
    mcp_url: str, make_key: MakeKey, client: TestClient
) -> None:
    tenant = _tenant()
    alice = make_key(tenant=tenant)
    lives = _remember(client, alice, "PROFILE", "我住在上海浦东", abstract="住在上海")
    tea = _remember(client, alice, "PREFERENCE", "喜欢喝乌龙茶", abstract="喜欢乌龙茶")
    corrected = client.patch(f"/memories/{lives}", headers=auth(alice),
                             json={"expected_version": 1, "content": "我住在上海徐汇"})
    assert corrected.status_code == 200, corrected.text
    async with mcp_session(mcp_url, alice) as (session, _):
        found = data_of(await session.call_tool("search_memories", {"query": "上海", "top_k": 3}))
        only_preferences = data_of(await session.call_tool("search_memories",
                                                           {"query": "上海", "category": "PREFERENCE"}))
        detail = data_of(await session.call_tool("get_memory_detail", {"memory_id": lives}))
        provenance = data_of(await session.call_tool("get_memory_detail", {"memory_id": tea}))
    assert [item["memory_id"] for item in found["items"]][:1] == [lives]
    assert found["items"][0]["version"] == 2 and found["items"][0]["category"] == "PROFILE"
    assert all(item["category"] == "PREFERENCE" for item in only_preferences["items"])
    audit = client.get("/recall/audit", headers=auth(make_key(tenant=tenant, roles=("auditor",))),
                       params={"trace_id": found["trace_id"]})
    assert audit.status_code == 200 and len(audit.json()["events"]) == 1  # it was mnemo's recall, audited
    assert detail["content"] == "我住在上海徐汇" and detail["version"] == 2
    assert provenance["source"]["evidence_refs"] == ["msg-7"] and provenance["source_level"] == "E2"
    assert provenance["source"]["source_type"] == "EXPLICIT_USER_STATEMENT"
    assert [version["version"] for version in detail["history"]] == [1, 2]
    assert detail == client.get(f"/memories/{lives}", headers=auth(alice)).json()  # the same JSON as REST


async def test_another_users_memory_is_the_not_found_of_a_missing_one(
    mcp_url: str, make_key: MakeKey, client: TestClient
) -> None:
    tenant = _tenant()
    alice, bob = make_key(tenant=tenant), make_key(tenant=tenant, user="bob")
    bobs = _remember(client, bob, "PROFILE", "Bob lives in Berlin")
    stranger = _remember(client, make_key(), "PROFILE", "another tenant's")
    async with mcp_session(mcp_url, alice) as (session, _):
        errors = [error_of(await session.call_tool("get_memory_detail", {"memory_id": memory_id}))
                  for memory_id in (bobs, stranger, str(uuid.uuid4()), "not-a-uuid")]
        searched = data_of(await session.call_tool("search_memories", {"query": "Berlin"}))
    assert {error["code"] for error in errors} == {"not_found"}
    assert errors[0]["message"] == f"memory {bobs} does not exist"
    assert searched["items"] == []


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
