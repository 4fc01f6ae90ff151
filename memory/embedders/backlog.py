"""The worker's bundled model for the vector backlog: a one-thread engine per core, each batch shared between them.

Issue 28, item 2. One engine with a thread per core splits every matrix product of a batch between its threads
and waits for all of them after each one. When anything else takes one of the cores (a recall, PostgreSQL, any
other process), every one of those waits is for the thread that lost its core, and the other core idles too:
on two busy cores a batch of 64 ran at 2.8-3.3 texts/s that way, against 5.8-6.3 texts/s with two
one-thread engines taking half of it each. Split by texts, an engine that loses its core delays only its share.

The engines run at background priority (:data:`memory.priority` via ``Embedder(background=True)``): a recall's
query embedding (the API's own engines, :class:`api.limits.EmbeddingLanes`), its API process and its database
backend preempt them at once, and they take whatever CPU those leave.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate, pairwise

from memory.embedders.engine import MODEL_NAME, Embedder


def shares(texts: Sequence[str], parts: int) -> list[Sequence[str]]:
    """``texts`` cut into at most ``parts`` consecutive runs of about equal length in characters (an engine's time
    grows with its tokens), none empty; joined in order they are ``texts``."""
    prefix = list(accumulate((len(text) for text in texts), initial=0))
    cuts = [0]
    for part in range(1, parts):
        target = prefix[-1] * part / parts
        at = bisect_left(prefix, target, lo=cuts[-1] + 1, hi=len(texts))
        if at > cuts[-1] + 1 and target - prefix[at - 1] < prefix[at] - target:
            at -= 1  # the cut just before is closer to an equal share
        if cuts[-1] < at < len(texts):
            cuts.append(at)
    cuts.append(len(texts))
    return [texts[a:b] for a, b in pairwise(cuts) if b > a]


class BacklogEmbedder:
    """``engines`` (default: one per core) background engines, one thread each; a batch is shared between them.
    ``idle``: the engines in the kernel's idle class, not only niced (``MNEMO_CPU_POOL_IDLE``)."""

    def __init__(self, engines: int | None = None, *, idle: bool = True) -> None:
        count = engines or os.cpu_count() or 1
        self.name = MODEL_NAME
        self.engines = [Embedder(background=True, idle=idle, batch_threads=1) for _ in range(count)]
        self.dimensions = self.engines[0].dimensions
        self._threads = ThreadPoolExecutor(count, thread_name_prefix="mnemo-backlog-engine")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The passages' vectors, in order; an engine crash is raised once every share has come back."""
        runs = shares(texts, len(self.engines))
        if len(runs) <= 1:
            return self.engines[0].embed(texts)
        futures = [self._threads.submit(engine.embed, run) for engine, run in zip(self.engines, runs, strict=False)]
        failures = [error for future in futures if (error := future.exception()) is not None]
        if failures:
            raise failures[0]
        return [vector for future in futures for vector in future.result()]

    def embed_query(self, text: str) -> list[float]:
        """A query's vector (deletion's probes in the worker), from the first engine."""
        return self.engines[0].embed_query(text)

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        for engine in self.engines:
            engine.close()
