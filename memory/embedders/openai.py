"""Any OpenAI-compatible ``POST /v1/embeddings`` endpoint: TEI, vLLM, Ollama, a hosted embeddings API.

The answer is parsed strictly: exactly one vector per text (``data[].index`` a permutation of the
inputs' positions), each of ``MNEMO_EMBEDDINGS_DIMENSIONS`` finite numbers. Anything else is an
:class:`EmbeddingResponseInvalid` and no vector of that answer is stored. The model id stored with
each vector names the model, its dimensions, the passage prefix and the version of the rule that makes a
memory's text (:func:`memory.store.memory_text.vector_model_id`), so changing any of them makes every stored
vector stale and the backlog sweep re-embeds the corpus.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import httpx

from memory.embedders.base import EmbeddingResponseInvalid, checked_vectors
from memory.embedders.http import distinct_index, is_number, post_json, shown
from memory.embedders.settings import ModelSettings
from memory.store.memory_text import vector_model_id


def model_id(model: str, dimensions: int, passage_prefix: str) -> str:
    prefix = f":prefix-{hashlib.sha256(passage_prefix.encode()).hexdigest()[:8]}" if passage_prefix else ""
    return vector_model_id(f"openai:{model}:{dimensions}{prefix}")


class OpenAIEmbedder:
    """A :class:`memory.embedders.base.TextEmbedder` over HTTP; thread-safe (one pooled client)."""

    def __init__(self, base_url: str, model: str, dimensions: int, *, batch_size: int = 32,
                 timeout_seconds: float = 30.0, api_key: str | None = None, query_prefix: str = "",
                 passage_prefix: str = "") -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self._dimensions = dimensions
        self.batch_size = batch_size
        self._api_key = api_key
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self._client = httpx.Client(timeout=timeout_seconds)

    @classmethod
    def from_settings(cls, settings: ModelSettings) -> OpenAIEmbedder:
        """The endpoint of ``MNEMO_EMBEDDINGS_*``; a half-configured one stops the process, saying what is missing."""
        if settings.embeddings_base_url is None:
            raise ValueError("MNEMO_EMBEDDINGS_BASE_URL is not set")
        if not settings.embeddings_model or settings.embeddings_dimensions is None:
            raise ValueError("MNEMO_EMBEDDINGS_BASE_URL is set: MNEMO_EMBEDDINGS_MODEL and "
                             "MNEMO_EMBEDDINGS_DIMENSIONS must name the model and its vectors' dimensions too")
        key = settings.embeddings_api_key.get_secret_value() if settings.embeddings_api_key else None
        return cls(settings.embeddings_base_url, settings.embeddings_model, settings.embeddings_dimensions,
                   batch_size=settings.embeddings_batch_size, timeout_seconds=settings.embeddings_timeout_seconds,
                   api_key=key, query_prefix=settings.embeddings_query_prefix,
                   passage_prefix=settings.embeddings_passage_prefix)

    @property
    def name(self) -> str:
        return model_id(self.model, self._dimensions, self.passage_prefix)

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors += self._request([self.passage_prefix + t for t in texts[start : start + self.batch_size]])
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self._request([self.query_prefix + text])[0]

    def _request(self, inputs: list[str]) -> list[list[float]]:
        body = {"model": self.model, "input": inputs, "encoding_format": "float"}
        answer = post_json(self._client, self.url, body, self._api_key, "embeddings endpoint")
        return checked_vectors(self._parse(answer, len(inputs)), len(inputs), self._dimensions, self.model)

    def _parse(self, answer: Any, count: int) -> list[list[float]]:
        """``data`` in input order; a malformed answer is refused whole."""
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            raise EmbeddingResponseInvalid(f"the embeddings endpoint at {shown(self.url)} answered without a data list")
        by_index: dict[int, list[float]] = {}
        for item in data:
            index = distinct_index(item, count, by_index)
            vector = item.get("embedding") if isinstance(item, dict) else None
            if index is None:
                raise EmbeddingResponseInvalid(
                    f"the embeddings endpoint at {shown(self.url)} answered an item without a distinct index "
                    f"in 0..{count - 1}")
            if not isinstance(vector, list) or not all(is_number(x) for x in vector):
                raise EmbeddingResponseInvalid(
                    f"the embeddings endpoint at {shown(self.url)} answered an embedding that is not a list of "
                    "numbers (encoding_format float was asked for)")
            by_index[index] = vector
        return [by_index[i] for i in sorted(by_index)]

    def close(self) -> None:
        self._client.close()
