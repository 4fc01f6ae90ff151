"""Many tenants: a small tenant's recall p95 beside 1,000 tenants and a big one, against the same tenant alone.

Issue 28, item 4. The rows are loaded by ``bench/recall_latency.py``'s :class:`~bench.recall_latency.Loader`
(the same real base vectors plus noise, the same COPY of memories, projection rows and postings, the same
index drop and rebuild), in two steps of one run:

1. **Alone.** The measured tenant (``--per-tenant`` memories of one user) is the only one in the tables;
   ``--queries`` ``POST /memory-query`` requests as that user (after ``--warmup``), client-side.
2. **Beside the others.** ``--tenants`` minus 1 more tenants of ``--per-tenant`` memories each, and one tenant of
   ``--big`` memories (the recall benchmark's tenant, its users' shares included), all in the same tables and
   the same HNSW index; then the same requests as the same user again.

Printed: p50 / p95 of both steps and ``ratio`` = p95 beside / p95 alone (target ≤ 1.2). The machine is shared:
each step also times the query embedding alone, in this process, as a control of how fast the cores were then.

Usage: ``.venv/bin/python -m bench.many_tenants [--tenants 1000 --per-tenant 1000 --big 100000] --json OUT``
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.corpus import base_texts, questions
from bench.harness import make_key, percentiles, say, services
from bench.recall_latency import TENANT, USER, Loader, call_api, embed_all
from memory.embedders.engine import Embedder

SMALL = "small-{n:04d}"
"""The small tenants' ids; the first (``n`` = 0) is the one measured."""


def add_tenants(conninfo: str, tenants: list[str]) -> None:
    """The tenants and their user, as their first API key would create them (the others need no key)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("INSERT INTO tenants (tenant_id) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING", (tenants,))
        conn.execute("INSERT INTO principals (tenant_id, user_id) SELECT unnest(%s::text[]), %s ON CONFLICT DO NOTHING",
                     (tenants, USER))


def measure(api: httpx.Client, embedder: Embedder, qs: list[str], warmup: int) -> dict[str, Any]:
    """The API's client-side ms over ``qs`` (after ``warmup``), and the query embedding alone as a control."""
    api_ms = [call_api(api, q)[0] for q in qs][warmup:]
    embed_ms = []
    for q in qs[warmup:]:
        started = time.perf_counter()
        embedder.embed_one(q)
        embed_ms.append((time.perf_counter() - started) * 1000)
    return {"api": percentiles(api_ms), "embed_control": percentiles(embed_ms), "load_average": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000, help="small tenants, the measured one included")
    parser.add_argument("--per-tenant", type=int, default=1000, help="memories in each small tenant")
    parser.add_argument("--big", type=int, default=100_000, help="memories in the big tenant")
    parser.add_argument("--base-texts", type=int, default=1000, help="texts embedded for real")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--queries", type=int, default=300, help="measured requests per step")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--vectors-cache", type=Path, help="as bench.recall_latency's")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    run_started = time.monotonic()
    smalls = [SMALL.format(n=n) for n in range(args.tenants)]
    results: dict[str, Any] = {"machine": f"{os.cpu_count()} cores", "tenants": args.tenants,
                               "per_tenant": args.per_tenant, "big": args.big}
    with services("mnemo-bench-tenants-") as svc:
        key = make_key(svc.sqlalchemy_url, smalls[0], USER, ["memory_writer"])
        add_tenants(svc.conninfo, [TENANT, *smalls[1:]])
        embedder = Embedder()
        texts = base_texts(args.base_texts)
        vectors = embed_all(embedder, texts, "base texts", cache=args.vectors_cache)
        loader = Loader(svc.conninfo, texts, vectors, args.noise)
        qs = questions(args.warmup + args.queries)
        api = httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)

        def load(tenants: list[tuple[str, int]]) -> dict[str, float]:
            loader.drop_indexes()
            started = time.monotonic()
            for n, (tenant, target) in enumerate(tenants, 1):
                loader.grow(tenant, target)
                if n % 100 == 0:
                    say(f"    {n}/{len(tenants)} tenants loaded")
            copied = time.monotonic() - started
            build = loader.build_indexes(args.maintenance_work_mem)
            return {"load_seconds": copied, "index_seconds": sum(build.values())}

        say(f"  alone: {smalls[0]} with {args.per_tenant:,} memories")
        results["alone_load"] = load([(smalls[0], args.per_tenant)])
        results["alone"] = measure(api, embedder, qs, args.warmup)
        say(f"    alone: p50 {results['alone']['api']['p50']:.1f}  p95 {results['alone']['api']['p95']:.1f} ms")
        say(f"  beside {args.tenants - 1:,} more tenants of {args.per_tenant:,} and one of {args.big:,}")
        results["beside_load"] = load([*((t, args.per_tenant) for t in smalls[1:]), (TENANT, args.big)])
        results["beside"] = measure(api, embedder, qs, args.warmup)
        api.close()
    alone, beside = results["alone"], results["beside"]
    results["ratio"] = beside["api"]["p95"] / alone["api"]["p95"]
    results["total_minutes"] = (time.monotonic() - run_started) / 60
    say("")
    say(f"mnemo many tenants: {results['machine']}; {smalls[0]} ({args.per_tenant:,} memories), POST /memory-query")
    for step in ("alone", "beside"):
        f = results[step]
        say(f"  {step:>6}: p50 {f['api']['p50']:7.1f}  p95 {f['api']['p95']:7.1f} ms  (embedding alone p50 "
            f"{f['embed_control']['p50']:.1f} ms; load average {f['load_average']:.1f})")
    say(f"  ratio p95 beside / alone {results['ratio']:.2f}×  target ≤ 1.2: "
        f"{'met' if results['ratio'] <= 1.2 else 'MISSED'}; total {results['total_minutes']:.1f} min")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
