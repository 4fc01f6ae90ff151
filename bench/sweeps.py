"""What one run of each scheduled sweep costs as tenants multiply (issue 28, items 4 and 6).

The sweeps (embedding every 10 s; session commits and knowledge reviews every minute; retention) visit
tenants. A sweep's cost should follow the tenants that have work, not the tenants that exist: at 10k tenants
a sweep that spends an activity on every tenant takes minutes per run and its history outgrows Temporal's
limit. The run measures each sweep on the same stack twice, in the same run:

1. the baseline: the bench tenant alone (one tenant with a few embedded memories, nothing due);
2. beside ``--tenants`` more tenants loaded the same way (rows by COPY, vectors stored, nothing due);

and prints, per sweep, the run's wall time (median of ``--runs``), its history length, and the ratio of the
two. Then one memory is written to one tenant among the many, and the time until its vector is stored by the
embedding sweep's next run is printed.

Command: ``python -m bench.sweeps --tenants 1000 --json OUT``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.corpus import base_texts, candidate
from bench.harness import Services, make_key, say, services
from bench.recall_latency import Loader, embed_all
from memory.embedders.engine import Embedder

TENANT = "sweep-bench"
MEMORIES_PER_TENANT = 3


@dataclass(frozen=True)
class Sweep:
    name: str
    workflow: str
    """The workflow type the Schedule starts."""


SWEEPS = (
    Sweep("embedding", "EmbeddingSweep"),
    Sweep("session_commit", "SessionCommitSweep"),
    Sweep("knowledge_review", "KnowledgeReviewSweep"),
    Sweep("retention", "RetentionSweep"),
)


async def _run_sweeps(svc: Services, runs: int) -> dict[str, Any]:
    """Each sweep ``runs`` times, started as its Schedule starts it; wall time and history length per run."""
    from api.settings import Settings
    from api.temporal import connect

    settings = Settings(temporal_address=svc.temporal_address, temporal_namespace=svc.temporal_namespace)
    client = await connect(settings)
    out: dict[str, Any] = {}
    for sweep in SWEEPS:
        seconds, events = [], []
        for _ in range(runs):
            workflow_id = f"bench-{sweep.name}-{uuid.uuid4().hex[:8]}"
            started = time.monotonic()
            handle = await client.start_workflow(sweep.workflow, {}, id=workflow_id, task_queue=settings.task_queue)
            await handle.result()
            seconds.append(time.monotonic() - started)
            events.append(len([e async for e in handle.fetch_history_events()]))
        out[sweep.name] = {"seconds_median": statistics.median(seconds), "seconds": seconds,
                           "history_events": max(events)}
    return out


def _clone_tenant(conninfo: str, source: str, names: list[str]) -> float:
    """``names`` as tenants holding copies of ``source``'s memories, projection rows and postings (new ids),
    in one transaction: what the latency bench's loader writes, without a connection per tenant."""
    started = time.monotonic()
    with psycopg.connect(conninfo, autocommit=False) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("INSERT INTO tenants (tenant_id) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING", (names,))
        conn.execute("CREATE TEMP TABLE clone_ids ON COMMIT DROP AS SELECT t AS tenant_id, m.memory_id AS source_id, "
                     "gen_random_uuid() AS memory_id FROM unnest(%s::text[]) AS t, memories m WHERE m.tenant_id = %s",
                     (names, source))
        for table in ("memories", "memory_search", "memory_lexemes"):
            conn.execute(
                f"INSERT INTO {table} SELECT (jsonb_populate_record(NULL::{table}, to_jsonb(r) "
                "|| jsonb_build_object('tenant_id', c.tenant_id, 'memory_id', c.memory_id))).* "
                f"FROM {table} r JOIN clone_ids c ON r.tenant_id = %s AND r.memory_id = c.source_id", (source,))
        conn.commit()
    return time.monotonic() - started


def _vector_follows_write(svc: Services, tenant: str, deadline_s: float) -> float | None:
    """Seconds from a write in ``tenant`` until the embedding Schedule's sweeps stored its vector (None: not
    within ``deadline_s``)."""
    key = make_key(svc.sqlalchemy_url, tenant, "u0", ["memory_writer"])
    with httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as api:
        started = time.monotonic()
        written = api.post("/memory-candidates", json=candidate("The sweep benchmark's probe memory",
                                                                 f"probe-{uuid.uuid4().hex[:8]}"))
        written.raise_for_status()
        memory_id = written.json()["memory_id"]
        while time.monotonic() - started < deadline_s:
            with psycopg.connect(svc.conninfo) as conn:
                row = conn.execute("SELECT embedding IS NOT NULL FROM memory_search WHERE tenant_id = %s "
                                   "AND memory_id = %s", (tenant, memory_id)).fetchone()
            if row and row[0]:
                return time.monotonic() - started
            time.sleep(0.2)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000, help="tenants loaded beside the bench tenant")
    parser.add_argument("--runs", type=int, default=3, help="runs of each sweep per phase (the median is kept)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": f"{os.cpu_count()} cores", "tenants": args.tenants}
    with services("mnemo-bench-sweeps-") as svc:
        say(f"sweep benchmark: each sweep alone, then beside {args.tenants:,} tenants ({MEMORIES_PER_TENANT} "
            f"embedded memories each, nothing due), {args.runs} runs each")
        texts = base_texts(20)
        loader = Loader(svc.conninfo, texts, embed_all(Embedder(), texts, "base texts"), noise=0.02)
        make_key(svc.sqlalchemy_url, TENANT, "u0", ["memory_writer"])
        loader.grow(TENANT, MEMORIES_PER_TENANT)
        alone = asyncio.run(_run_sweeps(svc, args.runs))
        names = [f"sweep-t{n:05d}" for n in range(args.tenants)]
        say(f"  loading {args.tenants:,} tenants")
        results["load_seconds"] = _clone_tenant(svc.conninfo, TENANT, names)
        many = asyncio.run(_run_sweeps(svc, args.runs))
        results["sweeps"] = {}
        say(f"\n{'sweep':<18}{'alone':>10}{'beside ' + format(args.tenants, ','):>16}{'ratio':>8}"
            f"{'events alone':>14}{'events beside':>15}")
        for sweep in SWEEPS:
            a, m = alone[sweep.name], many[sweep.name]
            ratio = m["seconds_median"] / a["seconds_median"]
            results["sweeps"][sweep.name] = {"alone": a, "beside": m, "ratio": ratio}
            say(f"{sweep.name:<18}{a['seconds_median']:>9.2f}s{m['seconds_median']:>15.2f}s{ratio:>7.1f}×"
                f"{a['history_events']:>14}{m['history_events']:>15}")
        follows = _vector_follows_write(svc, names[len(names) // 2], deadline_s=180)
        results["vector_follows_write_seconds"] = follows
        say(f"\na write in one tenant among {args.tenants + 1:,}: its vector stored after "
            + (f"{follows:.1f}s" if follows is not None else "more than 180 s")
            + f" (the embedding Schedule runs every 10 s); load average {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
