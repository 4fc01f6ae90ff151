"""The one interface every embedding model sits behind, and the errors a model endpoint can answer with.

Recall's query vector (:class:`api.limits.EmbeddingLanes`), the worker's backlog sweep
(:mod:`activities.embedding`) and deletion's probes all call a :class:`TextEmbedder`; which one is
configuration (:func:`memory.embedders.configured_embedder`). ``name`` is the model id stored with every
vector: a vector written under another id is stale and the sweep re-embeds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from memory.embedders.engine import EmbeddingUnavailable


class TextEmbedder(Protocol):
    """Passages (memory texts) and queries in, L2-comparable vectors of ``dimensions`` floats out."""

    @property
    def name(self) -> str:
        """The model id stored with each vector (``memory_search.embedding_model``)."""
        ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One passage vector per text, in order."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query, compared against passage vectors of the same model."""
        ...

    def close(self) -> None: ...


class EmbeddingResponseInvalid(EmbeddingUnavailable):
    """The endpoint answered, but not with the vectors asked for: nothing of the answer is used or stored."""

    code = "embedding_response_invalid"
    http_status = 502


def checked_vectors(vectors: Sequence[Sequence[float]], count: int, dimensions: int, model: str) -> list[list[float]]:
    """``vectors`` if there are ``count`` of them, each of ``dimensions`` finite numbers with a direction.

    A vector of zeros has no cosine (pgvector answers NaN); a NaN or an infinity poisons every
    z-score of a recall pool. Either is refused here, before anything is stored or compared.
    """
    if len(vectors) != count:
        raise EmbeddingResponseInvalid(f"{model} returned {len(vectors)} vectors for {count} texts")
    checked = []
    for index, vector in enumerate(vectors):
        if len(vector) != dimensions:
            raise EmbeddingResponseInvalid(
                f"{model} returned a {len(vector)}-dimensional vector (text {index}); "
                f"MNEMO_EMBEDDINGS_DIMENSIONS is {dimensions}",
                details={"expected_dimensions": dimensions, "returned_dimensions": len(vector)},
            )
        values = [float(x) for x in vector]
        if not all(math.isfinite(x) for x in values):
            raise EmbeddingResponseInvalid(f"{model} returned a vector with a non-finite value (text {index})")
        if not any(values):
            raise EmbeddingResponseInvalid(f"{model} returned a vector of zeros (text {index}): it has no direction")
        checked.append(values)
    return checked
