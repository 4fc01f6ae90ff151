"""Ingest throughput: memory events per second through the real API, against bare INSERTs of the same rows.

One *memory event* is what the real ingest path does for one message: ``POST
/memory-events`` (the source message, idempotent by key) and then ``POST
/memory-candidates`` (the memory extracted from it, citing the event as its
source), each its own request and transaction, one at a time from one client.
Three phases, each in its own tenant, in the same run and on the same texts
(``--n`` varied Chinese / English / mixed memory texts):

1. **bare INSERTs**: per event, one transaction of plain SQL — ``INSERT INTO
   memory_events`` and ``INSERT INTO memories`` with the same values the API
   writes (revision from ``mnemo_revision_seq``), no projection, no API;
2. **API + embeddings**: the requests above with the worker's embedding Schedule
   running (the ``EmbeddingSweep`` workflow every 10 s, as in production); the
   clock stops when the last vector of the tenant is stored (current model,
   ``embedding_revision`` = the memory's revision), polled every 0.2 s;
3. **API, lexical projection only**: the same requests with the embedding
   Schedule paused, so the write path (row + lexical projection in one
   transaction) is measured alone.

Usage: ``.venv/bin/python -m bench.ingest [--n 500]``. It starts the embedded
stack by itself (temp dir, removed after), or uses the MNEMO_* services when
``MNEMO_DATABASE_URL`` is set (``MNEMO_API_URL``, ``MNEMO_TEMPORAL_ADDRESS``; it
writes tenants ``ingest-*`` there).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.corpus import CATEGORIES, base_texts, candidate
from bench.harness import embedding_schedule, make_key, percentiles, say, services, wait_for_vectors
from memory.store.memories import abstract_for

USER = "u0"
CAPTURED = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


def event_body(i: int, text: str) -> dict[str, Any]:
    return {"idempotency_key": f"ingest-{i}", "kind": "MESSAGE", "payload": {"role": "user", "text": text},
            "occurred_at": (CAPTURED + timedelta(seconds=i)).isoformat(), "session_id": "s-1"}


def candidate_body(i: int, text: str, event_id: str) -> dict[str, Any]:
    return candidate(text, event_id, source_type="MESSAGE", captured_at=(CAPTURED + timedelta(seconds=i)).isoformat(),
                     category=CATEGORIES[i % len(CATEGORIES)])


def api_ingest(api_url: str, key: str, texts: list[str], label: str) -> dict[str, Any]:
    event_ms: list[float] = []
    candidate_ms: list[float] = []
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        started = time.perf_counter()
        last = time.monotonic()
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            response = client.post("/memory-events", json=event_body(i, text))
            t1 = time.perf_counter()
            response.raise_for_status()
            written = client.post("/memory-candidates", json=candidate_body(i, text, response.json()["event_id"]))
            t2 = time.perf_counter()
            written.raise_for_status()
            assert written.json()["status"] == "ACTIVE", written.json()
            event_ms.append((t1 - t0) * 1000)
            candidate_ms.append((t2 - t1) * 1000)
            if time.monotonic() - last > 10:
                last = time.monotonic()
                say(f"    {label}: {i + 1}/{len(texts)} events ({(i + 1) / (time.perf_counter() - started):.1f}/s)")
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "events_per_s": len(texts) / seconds, "event_ms": percentiles(event_ms),
            "candidate_ms": percentiles(candidate_ms)}


def bare_ingest(conninfo: str, tenant: str, texts: list[str]) -> dict[str, Any]:
    """The same rows with plain SQL INSERTs, one transaction per event, no projection."""
    with psycopg.connect(conninfo) as conn:
        started = time.perf_counter()
        for i, text in enumerate(texts):
            body = event_body(i, text)
            digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            with conn.transaction():
                event_id = uuid.uuid4()
                conn.execute(
                    "INSERT INTO memory_events (tenant_id, event_id, idempotency_key, request_sha256, kind, user_id, "
                    "session_id, payload, occurred_at, revision) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, "
                    "nextval('mnemo_revision_seq'))",
                    (tenant, event_id, body["idempotency_key"], digest, "MESSAGE", USER, "s-1",
                     json.dumps(body["payload"]), CAPTURED + timedelta(seconds=i)),
                )
                conn.execute(
                    "INSERT INTO memories (tenant_id, memory_id, version, status, category, space, owner_id, abstract, "
                    "content, source_id, source_type, captured_at, evidence_refs, source_level, confidence, "
                    "allowed_purposes, created_by, revision) VALUES (%s, %s, 1, 'ACTIVE', %s, 'USER', %s, %s, %s, %s, "
                    "'MESSAGE', %s, '[]', 'E2', 0.9, '{}', %s, nextval('mnemo_revision_seq'))",
                    (tenant, uuid.uuid4(), CATEGORIES[i % len(CATEGORIES)], USER, abstract_for(text, None), text,
                     str(event_id), CAPTURED + timedelta(seconds=i), USER),
                )
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "events_per_s": len(texts) / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="memory events per phase")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    texts = base_texts(args.n, seed=23)
    results: dict[str, Any] = {"n": args.n}
    with services("mnemo-bench-ingest-") as svc:
        keys = {t: make_key(svc.sqlalchemy_url, t, USER, ["memory_writer"])
                for t in ("ingest-bare", "ingest-vec", "ingest-lex")}
        say(f"ingest benchmark: {args.n} memory events per phase (event + candidate, one at a time)")
        say("  phase 1/3: bare INSERTs (memory_events + memories, one transaction per event, no projection)")
        results["bare"] = bare_ingest(svc.conninfo, "ingest-bare", texts)
        say(f"  ✓ {results['bare']['events_per_s']:.1f} events/s")

        say("  phase 2/3: API with the embedding Schedule running; clock stops at the last stored vector")
        started = time.perf_counter()
        results["api_vec"] = api_ingest(svc.api_url, keys["ingest-vec"], texts, "API + embeddings")
        say(f"    requests done in {results['api_vec']['seconds']:.1f}s; waiting for the vectors")
        total = wait_for_vectors(svc.conninfo, "ingest-vec", args.n, started, timeout=max(600.0, args.n))
        results["api_vec"].update(until_vectors_s=total, events_per_s_with_vectors=args.n / total,
                                  vector_lag_after_last_request_s=total - results["api_vec"]["seconds"])
        say(f"  ✓ all {args.n} vectors stored {total:.1f}s after the first request "
            f"({args.n / total:.1f} events/s end to end)")

        say("  phase 3/3: API, lexical projection only (embedding Schedule paused)")
        embedding_schedule(svc, "pause", "bench/ingest.py: lexical-only phase")
        try:
            time.sleep(1.0)  # a sweep already running has nothing left to embed (phase 2 drained it)
            results["api_lex"] = api_ingest(svc.api_url, keys["ingest-lex"], texts, "API lexical")
        finally:
            embedding_schedule(svc, "unpause", "bench/ingest.py: done")
        say(f"  ✓ {results['api_lex']['events_per_s']:.1f} events/s")
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def report(r: dict[str, Any]) -> None:
    bare, lex, vec = r["bare"]["events_per_s"], r["api_lex"]["events_per_s"], r["api_vec"]["events_per_s_with_vectors"]
    say("")
    say(f"mnemo ingest: {r['n']} memory events per phase (POST /memory-events + POST /memory-candidates), "
        f"one client, one request at a time; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    say(f"  bare INSERTs (same rows, no projection)     {bare:8.1f} events/s")
    say(f"  API, lexical projection                     {lex:8.1f} events/s   {lex / bare:.2f}× bare "
        f"(event p50 {r['api_lex']['event_ms']['p50']:.1f} ms, "
        f"candidate p50 {r['api_lex']['candidate_ms']['p50']:.1f} ms)")
    say(f"  API + embeddings, until every vector stored {vec:8.1f} events/s   {vec / bare:.2f}× bare, "
        f"{vec / lex:.2f}× lexical (requests alone {r['api_vec']['events_per_s']:.1f}/s; last vector "
        f"{r['api_vec']['vector_lag_after_last_request_s']:.1f}s after the last request)")


if __name__ == "__main__":
    main()
