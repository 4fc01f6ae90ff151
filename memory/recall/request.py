"""What one recall is asked: the query, its plan, the filters and the steering the pipeline's stages read."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from memory.embedders.engine import EmbeddingUnavailable
from memory.embedders.rerank import Reranker
from memory.recall.bundle_types import TaskState
from memory.recall.plan import RecallPlan
from memory.store.visibility import QueryFilters
from memory.tasks.resumable import ResumableTask

EMBEDDING_WAIT_SECONDS = 30.0
"""How long a bundle waits for its query embedding (queued behind others on the one embedding thread)."""


@dataclass(frozen=True)
class RecallRequest:
    query: str
    plan: RecallPlan
    filters: QueryFilters = field(default_factory=QueryFilters)
    request_constraints: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    task_state: TaskState | None = None
    task_candidates: tuple[ResumableTask, ...] | None = None
    """The caller's resumable tasks when a RESUME_TASK recall named none (None: it named one, or reads no task)."""
    query_vector: list[float] | Future[list[float]] | None = None
    """The query's embedding, or its computation still running (awaited after the lexical sources)."""
    model: str | None = None
    min_relevance: float = 0.05
    """Below this, a candidate is reported as not applicable rather than injected to fill the top-k."""
    explain: bool = False
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    retrieval: str = "hybrid"
    """``hybrid`` (every source), ``lexical`` (key, full text, trigram) or ``semantic`` (vector only)."""
    reranker: Reranker | None = None
    """The rerank stage's endpoint (None: off)."""

    def vector(self) -> list[float] | None:
        """The query embedding, waiting (a bounded time) if it is still being computed."""
        if isinstance(self.query_vector, Future):
            try:
                return self.query_vector.result(timeout=EMBEDDING_WAIT_SECONDS)
            except FutureTimeout as exc:
                raise EmbeddingUnavailable(
                    f"the query embedding took longer than {EMBEDDING_WAIT_SECONDS:.0f} s; retry, "
                    "or ask with retrieval=lexical"
                ) from exc
        return self.query_vector
