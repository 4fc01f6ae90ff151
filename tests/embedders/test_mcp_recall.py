"""MCP's ``search_memories`` is mnemo's recall: the same service as POST /memory-query, reranker included."""

from __future__ import annotations

import uuid

import httpx
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from bench.model_server import ModelServer
from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, mcp_session
from tests.recall.conftest import write
from tests.workers import served

MEMORIES = ["Caroline adopted a golden retriever puppy last spring", "Caroline painted a sunrise over the lake",
            "Caroline is studying to become a counselor", "Caroline's kids love the beach in summer"]


async def test_mcp_search_reranks_like_rest(
    client: TestClient, make_key: MakeKey, settings: Settings, stand_in: ModelServer
) -> None:
    key = make_key(tenant=f"t-mcp-{uuid.uuid4().hex[:10]}")
    for content in MEMORIES:
        write(client, key, content)
    query = "Caroline counselor beach"
    rerank = {"rerank_base_url": stand_in.url, "rerank_top_n": 10, "rerank_model": "stand-in",
              "rerank_timeout_seconds": 60.0}  # 2 shared cores: no timing here
    with served(create_app(settings.model_copy(update=rerank))) as port:
        before = stand_in.requests["/rerank"]
        async with mcp_session(f"http://127.0.0.1:{port}/mcp", key) as (session, _):
            found = data_of(await session.call_tool("search_memories", {"query": query, "top_k": 2}))
        assert stand_in.requests["/rerank"] == before + 1  # the MCP recall asked the reranker
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            rest = (await http.post("/memory-query", json={"query": query, "limit": 2}, headers=auth(key))).json()
        assert stand_in.requests["/rerank"] == before + 2
    hits = sorted(rest["items"], key=lambda item: -item["score"])
    assert found["knowledge"] == rest["knowledge"] == []  # no published knowledge: memories are never knowledge
    assert [item["memory_id"] for item in found["items"]] == [item["memory_id"] for item in hits]
    assert [item["abstract"] for item in found["items"]] == [item["abstract"] for item in hits]
    assert found["items"] and all(item["score_breakdown"]["rerank"] is not None for item in hits)
