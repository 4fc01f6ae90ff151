"""The rerank stage: after fusion, a cross-encoder (TEI, Cohere-style ``/rerank``) reorders the top N.

Off unless ``MNEMO_RERANK_BASE_URL`` is set. The reranker reads the query and, for each of the
``MNEMO_RERANK_TOP_N`` best fused candidates, at most ``MNEMO_RERANK_MAX_CHARS`` of its text, within
``MNEMO_RERANK_TIMEOUT_SECONDS``: its own budget, apart from the embedding's. Those candidates are
ordered by its score (ties: the fused order), and each one's breakdown shows it (``rerank``); the
rest follow in the fused order.

The endpoint's client is :mod:`memory.embedders.rerank`. A reranker that fails (unreachable, slow,
malformed) costs no recall: the bundle says so in ``warnings`` (code ``rerank_unavailable`` /
``rerank_response_invalid``), the failure is counted (:mod:`memory.embedders.health`) and the fused order stands.
"""

from __future__ import annotations

from dataclasses import replace

from memory.embedders.health import count_failure
from memory.embedders.rerank import Reranker, RerankUnavailable
from memory.recall.scoring import Scored
from memory.store.memory_text import embedding_text


def rerank(reranker: Reranker | None, query: str, ranked: list[Scored]) -> tuple[list[Scored], list[str]]:
    """``ranked`` with its top N in the reranker's order (and their ``rerank`` scores), and any warning."""
    if reranker is None or not ranked:
        return ranked, []
    head, tail = ranked[: reranker.config.top_n], ranked[reranker.config.top_n :]
    try:
        scores = reranker.scores(query, [embedding_text(s.memory)[: reranker.config.max_chars] for s in head])
    except RerankUnavailable as exc:
        count_failure("rerank", exc.code)
        return ranked, [f"{exc.code}: the rerank stage failed, so these memories are in the fused order "
                        f"(not reranked): {exc.message}"]
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    reranked = [replace(head[i], breakdown=replace(head[i].breakdown, rerank=scores[i])) for i in order]
    return reranked + tail, []
