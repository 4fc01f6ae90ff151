"""Strict parsing of model answers: each malformed shape an endpoint could send is refused whole, with its reason."""

from __future__ import annotations

import math
from typing import Any

import pytest

from memory.embedders import EmbeddingResponseInvalid
from memory.embedders.base import checked_vectors
from memory.embedders.openai import OpenAIEmbedder
from memory.embedders.rerank import RerankConfig, Reranker, RerankResponseInvalid

UNUSED = "http://127.0.0.1:9"  # never contacted: these tests read answers, they send nothing


@pytest.mark.parametrize(("answer", "said"), [
    ([{"index": 0, "score": 0.5}], "scored 1 of 2 texts"),
    ([{"index": 0, "score": 0.5}, {"index": 0, "score": 0.4}], "distinct index"),
    ([{"index": True, "score": 0.5}, {"index": 1, "score": 0.4}], "distinct index"),
    ([{"index": 0, "score": 0.5}, {"index": 2, "score": 0.4}], "distinct index"),
    ([{"index": 0, "score": math.nan}, {"index": 1, "score": 0.4}], "exactly one finite score"),
    ([{"index": 0, "score": "0.5"}, {"index": 1, "score": 0.4}], "exactly one finite score"),
    ([{"index": 0, "score": 0.5, "relevance_score": 0.5}, {"index": 1, "score": 0.4}], "exactly one finite score"),
    ({"results": "none"}, "neither a list"),
    ({"data": []}, "neither a list"),
])
def test_a_malformed_rerank_answer_is_refused(answer: Any, said: str) -> None:
    reranker = Reranker(RerankConfig(UNUSED))
    with pytest.raises(RerankResponseInvalid, match=said):
        reranker._parse(answer, 2)
    reranker.close()


def test_both_rerank_shapes_are_read_in_the_texts_order() -> None:
    reranker = Reranker(RerankConfig(UNUSED))
    assert reranker._parse([{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}], 2) == [0.1, 0.9]
    cohere = {"results": [{"index": 1, "relevance_score": 2}, {"index": 0, "relevance_score": -1.5}]}
    assert reranker._parse(cohere, 2) == [-1.5, 2.0]
    reranker.close()


@pytest.mark.parametrize(("answer", "said"), [
    ({"data": [{"index": 0, "embedding": [0.1, 0.2]}]}, "returned 1 vectors for 2 texts"),
    ({"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 0, "embedding": [0.1, 0.2]}]}, "distinct index"),
    ({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [0.1, 0.2]}]}, "not a list of numbers"),
    ({"data": [{"index": 0, "embedding": [0.1, None]}, {"index": 1, "embedding": [0.1, 0.2]}]}, "list of numbers"),
    ({"data": [{"index": 0, "embedding": [0.1, math.inf]}, {"index": 1, "embedding": [0.1, 0.2]}]}, "non-finite"),
    ({"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [0.1, 0.2]}]}, "vector of zeros"),
    ({"data": [{"index": 0, "embedding": [0.1, 0.2, 0.3]}, {"index": 1, "embedding": [0.1, 0.2]}]}, "3-dimensional"),
    ({"object": "list"}, "without a data list"),
    ([[0.1, 0.2], [0.3, 0.4]], "without a data list"),
])
def test_a_malformed_embeddings_answer_is_refused(answer: Any, said: str) -> None:
    embedder = OpenAIEmbedder(UNUSED, "m", 2)
    with pytest.raises(EmbeddingResponseInvalid, match=said):
        checked_vectors(embedder._parse(answer, 2), 2, 2, "m")
    embedder.close()


def test_embeddings_come_back_in_the_inputs_order_whatever_the_answers_order() -> None:
    embedder = OpenAIEmbedder(UNUSED, "m", 2)
    answer = {"data": [{"index": 1, "embedding": [0.0, 1]}, {"index": 0, "embedding": [1, 0.0]}]}
    assert checked_vectors(embedder._parse(answer, 2), 2, 2, "m") == [[1.0, 0.0], [0.0, 1.0]]
    embedder.close()
