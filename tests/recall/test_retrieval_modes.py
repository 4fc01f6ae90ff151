"""The ``retrieval`` request option: hybrid (default), lexical only, semantic only; all inside the hard filters."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.recall.conftest import embed_tenant, ids, recall, write


def test_retrieval_mode_restricts_candidate_sources_and_relevance_signals(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    paraphrase = write(client, key, "The user is allergic to peanuts and must avoid them.")
    worded = write(client, key, "Foods on the office lunch menu change every Monday.")
    assert embed_tenant(recall_settings, tenant).written == 2
    query = {"query": "which foods can make me sick?", "limit": 5, "min_relevance": 0, "explain": True}

    hybrid = recall(client, key, **query)
    assert set(ids(hybrid)) == {paraphrase, worded}
    assert ids(recall(client, key, **query, retrieval="hybrid")) == ids(hybrid)  # the default

    lexical = recall(client, key, **query, retrieval="lexical")
    assert ids(lexical) == [worded]
    assert all("vector" not in c["matched_by"] for c in lexical["explain"]["candidates"])
    assert all(c["breakdown"]["cosine"] is None for c in lexical["explain"]["candidates"])

    semantic = recall(client, key, **query, retrieval="semantic")
    assert paraphrase in ids(semantic)
    for candidate in semantic["explain"]["candidates"]:
        assert candidate["matched_by"] == ["vector"]
        breakdown = candidate["breakdown"]
        assert breakdown["lexical"] == breakdown["fulltext"] == breakdown["trigram"] == 0
        assert breakdown["cosine"] is not None


def test_an_unknown_retrieval_mode_is_a_422(client: TestClient, make_key: MakeKey) -> None:
    key = make_key(tenant=f"t-{uuid.uuid4().hex[:12]}")
    response = client.post("/memory-query", json={"query": "anything", "retrieval": "bm25"}, headers=auth(key))
    assert response.status_code == 422, response.text
