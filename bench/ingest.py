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

With ``--batch B`` it measures batch ingest instead, in two phases of its own (the embedding Schedule paused,
as in phase 3): **bare batched INSERTs** (B events and B memories per transaction, one multi-row statement each,
no projection) against **the batch routes** (``POST /memory-events:batch`` then ``POST
/memory-candidates:batch`` citing the events, B items per request, lexical projection and postings included),
and prints ``bare_rows_per_s``, ``batch_rows_per_s`` and their ``ratio`` (a row: one event or one memory).

Usage: ``.venv/bin/python -m bench.ingest [--n 500]``, ``... --batch 500 --n 20000 --json OUT``. It starts the embedded
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


BARE_EVENT = ("INSERT INTO memory_events (tenant_id, event_id, idempotency_key, request_sha256, kind, user_id, "
              "session_id, payload, occurred_at, revision) SELECT %s, e.id, e.k, e.sha, 'MESSAGE', %s, 's-1', e.p, "
              "e.at, nextval('mnemo_revision_seq') FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::jsonb[], "
              "%s::timestamptz[]) AS e(id, k, sha, p, at)")
BARE_MEMORY = ("INSERT INTO memories (tenant_id, memory_id, version, status, category, space, owner_id, abstract, "
               "content, source_id, source_type, captured_at, evidence_refs, source_level, confidence, "
               "allowed_purposes, created_by, revision) SELECT %s, m.id, 1, 'ACTIVE', m.cat, 'USER', %s, m.abs, "
               "m.txt, m.src, 'MESSAGE', m.at, '[]', 'E2', 0.9, '{}', %s, nextval('mnemo_revision_seq') "
               "FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[]) "
               "AS m(id, cat, abs, txt, src, at)")


def _chunks(n: int, size: int) -> list[range]:
    return [range(start, min(start + size, n)) for start in range(0, n, size)]


def bare_batched(conninfo: str, tenant: str, texts: list[str], batch: int) -> dict[str, Any]:
    """The same rows as the batch routes write, with one multi-row INSERT of events and one of memories per
    transaction of ``batch`` (no projection, no API): the fastest plain SQL for them."""
    with psycopg.connect(conninfo) as conn:
        started = time.perf_counter()
        for chunk in _chunks(len(texts), batch):
            bodies = [event_body(i, texts[i]) for i in chunk]
            events = [uuid.uuid4() for _ in chunk]
            at = [CAPTURED + timedelta(seconds=i) for i in chunk]
            with conn.transaction():
                conn.execute(BARE_EVENT, (
                    tenant, USER, events, [b["idempotency_key"] for b in bodies],
                    [hashlib.sha256(json.dumps(b, sort_keys=True).encode()).hexdigest() for b in bodies],
                    [json.dumps(b["payload"]) for b in bodies], at))
                conn.execute(BARE_MEMORY, (
                    tenant, USER, USER, [uuid.uuid4() for _ in chunk], [CATEGORIES[i % len(CATEGORIES)] for i in chunk],
                    [abstract_for(texts[i], None) for i in chunk], [texts[i] for i in chunk],
                    [f"event:{e}" for e in events], at))
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": 2 * len(texts), "rows_per_s": 2 * len(texts) / seconds}


def api_batched(api_url: str, key: str, texts: list[str], batch: int) -> dict[str, Any]:
    """The batch routes over HTTP: per ``batch`` texts, their events in one request, then the memories citing
    them in another (every item must be committed)."""
    event_ms: list[float] = []
    memory_ms: list[float] = []
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=300) as client:
        started = time.perf_counter()
        last = time.monotonic()
        for chunk in _chunks(len(texts), batch):
            t0 = time.perf_counter()
            said = client.post("/memory-events:batch", json={"items": [event_body(i, texts[i]) for i in chunk]})
            t1 = time.perf_counter()
            said.raise_for_status()
            assert said.json()["committed"] == len(chunk), said.text[:500]
            ids = [r["event_id"] for r in said.json()["results"]]
            items = [candidate_body(i, texts[i], f"event:{event_id}") for i, event_id in zip(chunk, ids, strict=True)]
            written = client.post("/memory-candidates:batch", json={"items": items})
            t2 = time.perf_counter()
            written.raise_for_status()
            assert written.json()["committed"] == len(chunk), written.text[:500]
            event_ms.append((t1 - t0) * 1000)
            memory_ms.append((t2 - t1) * 1000)
            if time.monotonic() - last > 10:
                last = time.monotonic()
                rate = chunk.stop / (time.perf_counter() - started)
                say(f"    batches: {chunk.stop}/{len(texts)} events ({rate:.0f}/s)")
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": 2 * len(texts), "rows_per_s": 2 * len(texts) / seconds,
            "events_request_ms": percentiles(event_ms), "memories_request_ms": percentiles(memory_ms)}


def batch_main(args: argparse.Namespace) -> dict[str, Any]:
    """``--batch``: bare batched INSERTs against the batch routes, same rows, same batch size, same run."""
    texts = base_texts(args.n, seed=23)
    results: dict[str, Any] = {"n": args.n, "batch": args.batch}
    with services("mnemo-bench-ingest-") as svc:
        key = make_key(svc.sqlalchemy_url, "ingest-batch", USER, ["memory_writer"])
        make_key(svc.sqlalchemy_url, "ingest-bare-batch", USER, ["memory_writer"])  # the tenant row
        say(f"ingest benchmark, batches: {args.n} events + {args.n} memories, {args.batch} per transaction")
        embedding_schedule(svc, "pause", "bench/ingest.py: batch phases")
        try:
            say("  phase 1/2: bare batched INSERTs (memory_events + memories, no projection)")
            results["bare"] = bare_batched(svc.conninfo, "ingest-bare-batch", texts, args.batch)
            say(f"  ✓ {results['bare']['rows_per_s']:.0f} rows/s")
            say("  phase 2/2: POST /memory-events:batch + POST /memory-candidates:batch (lexical projection)")
            results["api"] = api_batched(svc.api_url, key, texts, args.batch)
            say(f"  ✓ {results['api']['rows_per_s']:.0f} rows/s")
        finally:
            embedding_schedule(svc, "unpause", "bench/ingest.py: done")
        results["stored"] = {tenant: stored_rows(svc.conninfo, tenant) for tenant in ("ingest-bare-batch",
                                                                                      "ingest-batch")}
    expected = {"ingest-bare-batch": (args.n, args.n, 0), "ingest-batch": (args.n, args.n, args.n)}
    for tenant, (events, memories, projected) in expected.items():
        got = results["stored"][tenant]
        if (got["memory_events"], got["memories"], got["memory_search"]) != (events, memories, projected) or \
                (got["memory_lexemes"] > 0) != (projected > 0):
            raise SystemExit(f"{tenant} holds {got}, not the rows its phase claims: no ratio printed")
    bare, api = results["bare"]["rows_per_s"], results["api"]["rows_per_s"]
    results.update(bare_rows_per_s=bare, batch_rows_per_s=api, ratio=api / bare)
    say("")
    say(f"mnemo batch ingest: {args.n} events + {args.n} memories, {args.batch} per transaction / request; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    say(f"  bare batched INSERTs (same rows, no projection)   bare_rows_per_s  {bare:8.0f}")
    say(f"  batch routes over HTTP (lexical projection)       batch_rows_per_s {api:8.0f}   ratio {api / bare:.2f}× "
        f"(events request p50 {results['api']['events_request_ms']['p50']:.0f} ms, "
        f"memories request p50 {results['api']['memories_request_ms']['p50']:.0f} ms)")
    return results


def stored_rows(conninfo: str, tenant: str) -> dict[str, int]:
    """What a phase left in its tenant: the baseline must hold the same events and memories and no projection."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        return {table: int(conn.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = %s",  # type: ignore[index]
                                        (tenant,)).fetchone()[0])
                for table in ("memory_events", "memories", "memory_search", "memory_lexemes")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="memory events per phase")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--batch", type=int, help="measure the batch routes, this many items per request")
    args = parser.parse_args()
    if args.batch:
        measured = batch_main(args)
        if args.json:
            args.json.write_text(json.dumps(measured, indent=2))
        return
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
