"""A client of a rerank endpoint (TEI, Cohere-style ``/rerank``): the query and texts in, one score per text out.

Two request protocols: ``tei`` sends ``{"query", "texts"}``, ``cohere`` sends ``{"model", "query",
"documents", "top_n"}``. Both answer shapes are read, strictly, whichever was sent: ``[{"index",
"score"}]`` (TEI) or ``{"results": [{"index", "relevance_score"}]}`` (Cohere): every text scored exactly
once, each score one finite number; anything else is :class:`RerankResponseInvalid`. The recall stage that
uses it is :mod:`memory.recall.rerank`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from memory.embedders.http import distinct_index, is_number, post_json, shown
from memory.embedders.settings import ModelSettings
from memory.errors import MnemoError

SCORE_KEYS = ("score", "relevance_score")
"""TEI names a result's score ``score``; Cohere, Jina and vLLM name it ``relevance_score``."""


class RerankUnavailable(MnemoError):
    code = "rerank_unavailable"
    http_status = 503


class RerankResponseInvalid(RerankUnavailable):
    code = "rerank_response_invalid"
    http_status = 502


@dataclass(frozen=True)
class RerankConfig:
    base_url: str
    model: str | None = None
    top_n: int = 20
    max_chars: int = 2_000
    timeout_seconds: float = 2.0
    api_key: str | None = None
    protocol: Literal["tei", "cohere"] = "tei"


class Reranker:
    """A client of one rerank endpoint; thread-safe (one pooled client)."""

    def __init__(self, config: RerankConfig) -> None:
        self.config = config
        self.url = config.base_url.rstrip("/") + "/rerank"
        self._client = httpx.Client(timeout=config.timeout_seconds)

    @classmethod
    def from_settings(cls, settings: ModelSettings) -> Reranker | None:
        """The endpoint of ``MNEMO_RERANK_*``, or None: no rerank stage."""
        if settings.rerank_base_url is None:
            return None
        key = settings.rerank_api_key.get_secret_value() if settings.rerank_api_key else None
        return cls(RerankConfig(settings.rerank_base_url, settings.rerank_model, settings.rerank_top_n,
                                settings.rerank_max_chars, settings.rerank_timeout_seconds, key,
                                settings.rerank_protocol))

    def scores(self, query: str, texts: list[str]) -> list[float]:
        """The reranker's score of each text, in the texts' order."""
        body: dict[str, Any]
        if self.config.protocol == "tei":
            body = {"query": query, "texts": texts}
        else:
            body = {"query": query, "documents": texts, "top_n": len(texts)}
            if self.config.model:
                body["model"] = self.config.model
        answer = post_json(self._client, self.url, body, self.config.api_key, "rerank endpoint",
                           RerankUnavailable, RerankResponseInvalid)
        return self._parse(answer, len(texts))

    def _parse(self, answer: Any, count: int) -> list[float]:
        """Either shape (a TEI list, or Cohere's ``results``); each result one index and one score, no text unscored."""
        items = answer.get("results") if isinstance(answer, dict) else answer
        if not isinstance(items, list):
            raise RerankResponseInvalid(f"the rerank endpoint at {shown(self.url)} answered neither a list of "
                                        "results nor an object with one under \"results\"")
        scores: dict[int, float] = {}
        for item in items:
            index = distinct_index(item, count, scores)
            found = [item[k] for k in SCORE_KEYS if k in item] if isinstance(item, dict) else []
            if index is None:
                raise RerankResponseInvalid(f"the rerank endpoint at {shown(self.url)} answered a result without "
                                            f"a distinct index in 0..{count - 1}")
            if len(found) != 1 or not is_number(found[0]) or not math.isfinite(found[0]):
                raise RerankResponseInvalid(f"the rerank endpoint at {shown(self.url)} answered a result without "
                                            "exactly one finite score (score or relevance_score)")
            scores[index] = float(found[0])
        if len(scores) != count:
            raise RerankResponseInvalid(f"the rerank endpoint at {shown(self.url)} scored {len(scores)} of "
                                        f"{count} texts")
        return [scores[i] for i in range(count)]

    def close(self) -> None:
        self._client.close()


__all__ = ["SCORE_KEYS", "RerankConfig", "RerankResponseInvalid", "RerankUnavailable", "Reranker"]
