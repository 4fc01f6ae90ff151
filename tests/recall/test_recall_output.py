"""What recall and a write tell the caller (issue 24 item 9): real vectors, real worker, real API."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from api.cli.demo.memory import DEMO_MEMORY
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.recall.conftest import embed_tenant, recall, write

DEMO_LIKE = {
    "delivery": str(DEMO_MEMORY["content"]),
    "city": "我住在上海，平时用中文交流。",
    "format": "I prefer plain text answers, no markdown please.",
    "brevity": "看起来你更喜欢简短的回答。",
}


def test_unrelated_memories_are_not_applicable_and_what_is_returned_scores_above_the_pools_average(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    ids = {name: write(client, key, text) for name, text in DEMO_LIKE.items()}
    assert embed_tenant(recall_settings, tenant).written == len(DEMO_LIKE)
    for query, wanted in (("销售报告发给谁", "delivery"), ("上海", "city"), ("我住在哪里", "city")):
        bundle = recall(client, key, query=query)
        assert [item["memory_id"] for item in bundle["items"]] == [ids[wanted]], query
        assert bundle["items"][0]["score"] > 0
        reasons = {entry["memory_id"]: entry["reason"] for entry in bundle["not_applicable"]}
        assert set(reasons) == {ids[name] for name in DEMO_LIKE if name != wanted}, query
        assert set(reasons.values()) <= {"below_relevance_floor", "vector_only_below_average"}
    # a paraphrase sharing no word is still found by its vector
    found = recall(client, key, query="what format do I like")
    assert found["items"][0]["memory_id"] == ids["format"]
    assert all(item["score"] >= 0 for item in found["items"])
    # min_relevance 0 keeps every candidate, ranked (the benchmarks' setting)
    everything = recall(client, key, query="销售报告发给谁", min_relevance=0)
    assert len(everything["items"]) == len(DEMO_LIKE) and everything["not_applicable"] == []


def test_a_write_says_it_is_searchable_by_its_words_now_and_by_its_vector_later(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    body = candidate("我每周三下午去健身房", idempotency_key="gym-1")
    first = client.post("/memory-candidates", json=body, headers=auth(key)).json()
    assert (first["stage"], first["indexes"]) == ("searchable", {"lexical": "indexed", "vector": "pending"})
    assert first["vector_expected_within_seconds"] == 10
    assert [item["memory_id"] for item in recall(client, key, query="健身房")["items"]] == [first["memory_id"]]
    assert embed_tenant(recall_settings, tenant).written == 1
    replay = client.post("/memory-candidates", json=body, headers=auth(key)).json()
    assert (replay["stage"], replay["indexes"]) == ("indexed", {"lexical": "indexed", "vector": "indexed"})
    assert replay["replayed"] and replay["vector_expected_within_seconds"] is None
