"""Recall's knowledge source at K published items: its cost against a bare indexed lookup and inside a bundle.

Since issue 27 every ANSWER / RESUME_TASK / OPERATE recall runs :func:`memory.knowledge.recall.recall_knowledge`.
Per K (``--sizes``, default 50, 500, 5000 rows of ``knowledge_items`` in the benchmark tenant; another tenant holds
the same rows under other ids):

1. **Rows.** A few items go through the real path (:func:`memory.knowledge.candidates.propose` then
   :func:`memory.knowledge.publish.publish`, one superseding another); the rest are bulk INSERTs of what
   ``publish`` writes: an APPROVED candidate, and the item with ``search_text`` = ``claim_text`` of
   ``searchable_text``, ``tokens`` = ``to_tsvector('simple', …)`` of :func:`memory.text.lexemes`, an embedding
   = the real vector (default model, ``passage:``) of one of ``--base-texts`` texts plus noise, as
   bench/recall_latency.py does, and the model's name. The run checks that the bulk derivation gives exactly
   the columns the real publish wrote. A seeded mix: authority P0-P3, ACTIVE / WITHDRAWN, one in seven items
   with a SUPERSEDED first version, TENANT or PROJECT scope, validity open, current, expired or future. The
   tenant also holds ``--memories`` memories (bench/recall_latency.py's loader), so a bundle has work besides.
2. **The source alone**, in-process, the same query vector: ``recall_knowledge`` p50/p95 against the bare lookup
   it cannot beat, the ACTIVE item of one key through ``knowledge_items_one_active_key`` (:func:`bare_sql`), in
   the same transaction, order alternating. Every statement of both is EXPLAINed and shown as index or scan; no
   ratio is printed for a K where the baseline does not walk its index.
3. **In a bundle**: ``build_bundle`` with the ANSWER plan against the same plan without its KNOWLEDGE source (no
   request option leaves knowledge out), interleaved; and ``POST /memory-query`` over HTTP (intent ANSWER), whose
   p50 the in-process difference is set against.
4. **Correctness**: every knowledge entry of every bundle (API and in-process) is checked in Python against the
   generated rows: the tenant's, ACTIVE, P0-P2, TENANT or the request's project, inside its validity window.
   A quarter of the requests name keys, drawn from all the generated ones (P3, withdrawn, expired included).

Waits first while the 1-minute load average is above ``--max-load`` (up to ``--max-wait-minutes``).

Usage: ``.venv/bin/python -m bench.knowledge_recall [--sizes 50,500,5000] [--queries 150] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session

from bench.corpus import base_texts, questions
from bench.harness import make_key, percentiles, say, services
from bench.recall_latency import OTHER_TENANTS, TENANT, USER, Loader, embed_all
from memory.db import make_engine, tenant_session
from memory.embedders.engine import MODEL_NAME, Embedder
from memory.identity.auth import PrincipalContext
from memory.knowledge.candidates import Author, claim_text, get_candidate, propose
from memory.knowledge.content import RECALLED_AUTHORITIES, Authority, Proposal, ScopeType, content_sha256
from memory.knowledge.publish import Vector, publish, searchable_text
from memory.knowledge.recall import recall_knowledge
from memory.recall.bundle import build_bundle, knowledge_query
from memory.recall.plan import Intent, RecallPlan, SourceType, make_plan
from memory.recall.request import RecallRequest
from memory.store.visibility import QueryFilters
from memory.text import lexemes

OTHER = OTHER_TENANTS[0]
PROJECTS = ("Apollo", "Hermes", "Orion", "Atlas")
AUTHORITIES = ("P0", "P1", "P2", "P3")
AUTHORITY_WEIGHTS = (0.15, 0.25, 0.35, 0.25)


# --------------------------------------------------------------------------- the rows


@dataclass(frozen=True)
class Row:
    """One generated version of an item (its content as proposed): what every bundle entry is checked against."""

    knowledge_id: uuid.UUID
    version: int
    status: str
    base: int
    content: Proposal

    def applies(self, project_id: str | None, now: datetime) -> str | None:
        """Why this row may not be a fact of a bundle for ``project_id`` at ``now`` (None: it may)."""
        c = self.content
        if self.status != "ACTIVE":
            return f"status {self.status}"
        if c.authority not in RECALLED_AUTHORITIES:
            return f"authority {c.authority.value}"
        if c.scope_type is ScopeType.PROJECT and c.project_id != project_id:
            return f"project {c.project_id} in a request for {project_id}"
        if c.valid_from is not None and c.valid_from > now:
            return f"valid from {c.valid_from.isoformat()}"
        if c.valid_to is not None and c.valid_to <= now:
            return f"expired at {c.valid_to.isoformat()}"
        return None


@dataclass
class Corpus:
    """The generated rows per tenant, by (knowledge_id, version), and every key generated (any status)."""

    texts: list[str]
    vectors: np.ndarray
    noise: float
    started: datetime
    rows: dict[str, dict[tuple[uuid.UUID, int], Row]] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    items: int = 0
    real: dict[str, list[tuple[uuid.UUID, int]]] = field(default_factory=dict)
    """Per tenant, the versions published through propose + publish."""

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(27)

    def count(self, tenant: str) -> int:
        return len(self.rows.get(tenant, {}))

    def item(self, j: int, tenant: str) -> list[Row]:
        """Item ``j``'s versions in ``tenant`` (same content in every tenant, ids of its own)."""
        r = random.Random(j)
        b = j % len(self.texts)
        authority = r.choices(AUTHORITIES, AUTHORITY_WEIGHTS)[0]
        project = PROJECTS[j % len(PROJECTS)] if r.random() < 0.4 else None
        u, day = r.random(), timedelta(days=1)
        window: tuple[datetime | None, datetime | None] = (
            (None, None) if u < 0.6 else (self.started - 30 * day, self.started + 30 * day) if u < 0.75
            else (self.started - 60 * day, self.started - day) if u < 0.85
            else (self.started + day, None) if u < 0.95 else (self.started - 10 * day, None))
        key = f"kb.{j}" if j % 2 == 0 else None
        final = "ACTIVE" if r.random() < 0.88 else "WITHDRAWN"
        versions = ["SUPERSEDED", final] if r.random() < 1 / 7 else [final]
        kid = uuid.uuid5(uuid.NAMESPACE_URL, f"bench-knowledge/{tenant}/{j}")
        return [Row(kid, n + 1, status, b, Proposal(
                    claim=f"{self.texts[b]}（kb #{j} v{n + 1}）", authority=Authority(authority),
                    scope_type=ScopeType.PROJECT if project else ScopeType.TENANT, source_refs=(f"doc:bench/{kid}",),
                    project_id=project, key=key, valid_from=window[0], valid_to=window[1]))
                for n, status in enumerate(versions)]

    def record(self, tenant: str, row: Row) -> None:
        self.rows.setdefault(tenant, {})[(row.knowledge_id, row.version)] = row
        if row.content.key is not None and row.content.key not in self.keys:
            self.keys.append(row.content.key)


def derived(row: Row) -> tuple[str, str]:
    """``search_text`` and the token text ``publish`` derives from an item's claim and key."""
    searchable = searchable_text(row.content.claim, None, row.content.key)
    return claim_text(searchable), " ".join(lexemes(searchable))


CANDIDATE_SQL = (
    "INSERT INTO knowledge_candidates (tenant_id, candidate_id, state_version, status, key, claim, authority, "
    "scope_type, project_id, source_refs, valid_from, valid_to, origin, author_user_id, content_sha256, decision, "
    "decided_by, decided_at, knowledge_id, knowledge_version, created_at, updated_at) VALUES (%s, %s, 2, 'APPROVED', "
    "%s, %s, %s, %s, %s, %s, %s, %s, 'API', 'alice', %s, 'approve', 'rita', %s, %s, %s, %s, %s)"
)
ITEM_SQL = (
    "INSERT INTO knowledge_items (tenant_id, knowledge_id, version, status, key, claim, authority, scope_type, "
    "project_id, source_refs, valid_from, valid_to, candidate_id, author_user_id, reviewer_user_id, published_at, "
    "supersedes_version, content_sha256, withdrawn_reason, search_text, tokens, embedding, embedding_model) VALUES "
    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'alice', 'rita', %s, %s, %s, %s, %s, "
    "to_tsvector('simple', %s), %s::vector, %s)"
)


def bulk_insert(engine: Engine, corpus: Corpus, tenant: str, rows: Sequence[Row]) -> None:
    """``rows`` as ``publish`` leaves them (an approved candidate each), in one transaction."""
    noise = corpus.rng.normal(0.0, corpus.noise, (len(rows), corpus.vectors.shape[1])).astype(np.float32)
    vecs = corpus.vectors[[r.base for r in rows]] + noise
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    candidates, items = [], []
    for row, vec in zip(rows, vecs, strict=True):
        c, cid, at = row.content, uuid.uuid4(), corpus.started
        sha, refs, search_text, token_text = content_sha256(c), list(c.source_refs), *derived(row)
        content = (c.key, c.claim, c.authority.value, c.scope_type.value, c.project_id, refs, c.valid_from, c.valid_to)
        candidates.append((tenant, cid, *content, sha, at, row.knowledge_id, row.version, at, at))
        items.append((tenant, row.knowledge_id, row.version, row.status, *content, cid, at,
                      row.version - 1 or None, sha, "withdrawn by the bench" if row.status == "WITHDRAWN" else None,
                      search_text, token_text, "[" + ",".join(f"{x:.7f}" for x in vec) + "]", MODEL_NAME))
        corpus.record(tenant, row)
    dbapi = engine.raw_connection()
    try:
        cursor = dbapi.cursor()
        cursor.execute("SELECT set_config('mnemo.tenant_id', %s, true)", (tenant,))  # row-level security
        cursor.executemany(CANDIDATE_SQL, candidates)
        cursor.executemany(ITEM_SQL, items)
        dbapi.commit()
    finally:
        dbapi.close()


REAL_PUBLISHED = 6
"""Items per tenant through propose + publish; the last supersedes the first (same key and scope)."""


def publish_real(engine: Engine, embedder: Embedder, corpus: Corpus, tenant: str) -> None:
    """:data:`REAL_PUBLISHED` items through propose + publish (embedded for real); the last supersedes the first."""
    made = [corpus.item(j, tenant)[-1] for j in range(REAL_PUBLISHED - 1)]
    made = [replace(r, status="ACTIVE", version=1) for r in made]
    made.append(replace(made[0], content=replace(made[0].content, claim=made[0].content.claim + "（修订）"), version=2))
    for row in made:
        with tenant_session(engine, tenant) as s:
            candidate = propose(s, Author(tenant, "alice"), row.content, corpus.started).candidate
            text_ = searchable_text(row.content.claim, None, row.content.key)
            item = publish(s, get_candidate(s, tenant, candidate.candidate_id, lock=True), "rita", corpus.started,
                           Vector(embedder.embed([text_])[0], MODEL_NAME))
            if item.supersedes_version is not None:
                old = corpus.rows[tenant][(item.knowledge_id, item.supersedes_version)]
                corpus.record(tenant, replace(old, status="SUPERSEDED"))
            corpus.record(tenant, replace(row, knowledge_id=item.knowledge_id, version=item.version))
            corpus.real.setdefault(tenant, []).append((item.knowledge_id, item.version))
    corpus.items = max(corpus.items, REAL_PUBLISHED - 1)


def check_derivation(engine: Engine, corpus: Corpus, tenant: str) -> int:
    """The bulk derivation gives exactly what the real publish wrote (search text, tokens, model)."""
    checked = 0
    with tenant_session(engine, tenant) as s:
        for kid, version in corpus.real[tenant]:
            search_text, tokens, model = s.execute(text(
                "SELECT search_text, tokens::text, embedding_model FROM knowledge_items "
                "WHERE tenant_id = :t AND knowledge_id = :k AND version = :v"),
                {"t": tenant, "k": kid, "v": version}).one()
            search, token_text = derived(corpus.rows[tenant][(kid, version)])
            expected = s.execute(text("SELECT to_tsvector('simple', :t)::text"), {"t": token_text}).scalar_one()
            assert (search_text, tokens, model) == (search, expected, MODEL_NAME), (kid, version)
            checked += 1
    assert checked == REAL_PUBLISHED, f"{checked} really published rows found"
    return checked


def grow(engine: Engine, corpus: Corpus, target: int) -> None:
    """Both tenants to ``target`` rows (item by item, so the last item may add one version more)."""
    while corpus.count(TENANT) < target:
        batch: dict[str, list[Row]] = {TENANT: [], OTHER: []}
        while corpus.count(TENANT) + len(batch[TENANT]) < target:
            for tenant in batch:
                batch[tenant].extend(corpus.item(corpus.items, tenant))
            corpus.items += 1
        for tenant, rows in batch.items():
            bulk_insert(engine, corpus, tenant, rows)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE) knowledge_items"))
        conn.execute(text("VACUUM (ANALYZE) knowledge_candidates"))


# --------------------------------------------------------------------------- plans


BASELINE_INDEX = "knowledge_items_one_active_key"


def bare_sql() -> str:
    """The ACTIVE TENANT item of one key: ``knowledge_items_one_active_key``'s own columns and predicate."""
    return ("SELECT knowledge_id, version, claim FROM knowledge_items WHERE tenant_id = :t AND key = :k "
            "AND scope_type = 'TENANT' AND coalesce(project_id, '') = '' AND status = 'ACTIVE' AND key IS NOT NULL")


def access(plan: str) -> str:
    """How a plan reads knowledge_items: each index it walks with its condition (an index whose only condition is
    the tenant reads every row of the tenant it covers), or a sequential scan."""
    lines = plan.splitlines()
    parts: list[str] = []
    for n, line in enumerate(lines):
        found = re.search(r"Index (?:Only )?Scan (?:Backward )?(?:using|on) (knowledge_items\w*)", line)
        if found:
            cond = next((c.split("Index Cond:", 1)[1].strip() for c in lines[n + 1 : n + 4] if "Index Cond:" in c),
                        "none")
            cond = re.sub(r"'[0-9a-f]{8}-[0-9a-f-]{27}'::uuid", "<id>", cond)
            whole = re.fullmatch(r"\(tenant_id = '[^']*'::text\)", cond)
            parts.append(f"index {found[1]} " + ("walking every row of the tenant it covers" if whole
                                                 else f"(cond {cond})"))
        elif "Seq Scan on knowledge_items" in line:
            parts.append("SEQ SCAN")
    return " + ".join(dict.fromkeys(parts)) or "no knowledge_items access"


def kind_of(sql: str) -> str:
    for marker, kind in (("@@", "full text"), ("<%", "trigram"), ("<=>", "vector"), ("key IN", "key"),
                         ("count(", "knowledge_version"), ("version >", "successor")):
        if marker in sql:
            return kind
    return "other"


def explain_source(engine: Engine, q: Any) -> list[tuple[str, str, str]]:
    """Every statement ``recall_knowledge`` runs for ``q``, EXPLAIN ANALYZEd in the same transaction: (which,
    access and execution time, plan). The first statement of a kind filters facts, the second lapsed items (the
    source's order); a successor's is one per warning, the first analysed."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if not statement.startswith("EXPLAIN"):
            seen.append((statement, parameters))

    out: list[tuple[str, str, str]] = []
    with tenant_session(engine, TENANT) as s:
        event.listen(engine, "before_cursor_execute", capture)
        try:
            recall_knowledge(s, TENANT, q, datetime.now(UTC))
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        kinds: dict[str, int] = {}
        for statement, parameters in seen:
            kind = kind_of(statement)
            kinds[kind] = kinds.get(kind, 0) + 1
            which = kind if kind in ("knowledge_version", "successor", "other") else (
                f"{'facts' if kinds[kind] == 1 else 'lapsed'}: {kind}")
            if kind == "successor" and kinds[kind] > 1:
                out.append((which, "one more, as the first", ""))
                continue
            plan = "\n".join(re.sub(r"'\[[^']*\]'", "'[…]'", r[0]) for r in s.connection().exec_driver_sql(
                "EXPLAIN (ANALYZE, COSTS OFF) " + statement, parameters).all())
            ms = re.search(r"Execution Time: ([0-9.]+) ms", plan)
            out.append((which, access(plan) + (f"; {float(ms[1]):.2f} ms" if ms else ""), plan))
    return out


def bare_lookup(s: Session, key: str) -> list[Any]:
    return list(s.execute(text(bare_sql()), {"t": TENANT, "k": key}).all())


def baseline_plan(engine: Engine, key: str) -> str:
    with tenant_session(engine, TENANT) as s:
        return "\n".join(r[0] for r in s.execute(text("EXPLAIN (COSTS OFF) " + bare_sql()), {"t": TENANT, "k": key}))


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Ask:
    """One measured request: its query, embedding, project and keys."""

    query: str
    vector: list[float]
    project_id: str | None
    keys: tuple[str, ...]

    def request(self, plan: RecallPlan) -> RecallRequest:
        return RecallRequest(query=self.query, plan=plan, filters=QueryFilters(project_id=self.project_id),
                             keys=self.keys, query_vector=self.vector, model=MODEL_NAME)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"query": self.query, "intent": "ANSWER", "keys": list(self.keys)}
        return body | ({"project_id": self.project_id} if self.project_id else {})


def asks(embedder: Embedder, corpus: Corpus, n: int) -> list[Ask]:
    """Realistic questions, half in a project, a quarter naming keys drawn from every generated key."""
    r = random.Random(5)
    qs = questions(n)
    vectors = {q: embedder.embed_one(q) for q in set(qs)}  # the questions repeat (bench.corpus.QUESTIONS)
    return [Ask(q, vectors[q], PROJECTS[i % len(PROJECTS)] if i % 2 else None,
                tuple(r.sample(corpus.keys, 2)) if i % 4 == 3 else ())
            for i, q in enumerate(qs)]


@dataclass
class Checked:
    """The correctness check's tally."""

    bundles: int = 0
    entries: int = 0
    violations: list[str] = field(default_factory=list)

    def check(self, corpus: Corpus, ask: Ask, entries: Sequence[tuple[str, int]], now: datetime) -> None:
        self.bundles += 1
        for kid, version in entries:
            self.entries += 1
            row = corpus.rows[TENANT].get((uuid.UUID(kid), version))
            why = "not a row of this tenant" if row is None else row.applies(ask.project_id, now)
            if why is not None:
                self.violations.append(f"{kid} v{version} for {ask.query!r}: {why}")


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Milliseconds of one call, and its answer."""
    started = time.perf_counter()
    out = fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, out


def measure_source(engine: Engine, corpus: Corpus, items: Sequence[Ask], bare_keys: Sequence[str], warmup: int,
                   checked: Checked) -> dict[str, Any]:
    """``recall_knowledge`` and the bare key lookup, one transaction per ask, the order alternating."""
    source_ms: list[float] = []
    bare_ms: list[float] = []
    plan = make_plan(Intent.ANSWER)
    for n, ask in enumerate(items):
        q = knowledge_query(ask.request(plan))
        key = bare_keys[n % len(bare_keys)]
        with tenant_session(engine, TENANT) as s:
            now = datetime.now(UTC)
            if n % 2 == 0:
                s_ms, recalled = timed(recall_knowledge, s, TENANT, q, now)
                b_ms, found = timed(bare_lookup, s, key)
            else:
                b_ms, found = timed(bare_lookup, s, key)
                s_ms, recalled = timed(recall_knowledge, s, TENANT, q, now)
            assert len(found) == 1, f"the bare lookup of {key} found {len(found)} rows"
        checked.check(corpus, ask, [(e.knowledge_id, e.version) for e in recalled.entries], now)
        if n >= warmup:
            source_ms.append(s_ms)
            bare_ms.append(b_ms)
    return {"source": percentiles(source_ms), "bare": percentiles(bare_ms)}


def measure_bundle(engine: Engine, corpus: Corpus, items: Sequence[Ask], warmup: int,
                   checked: Checked) -> dict[str, Any]:
    """``build_bundle`` with the ANSWER plan and with the same plan minus its KNOWLEDGE source, interleaved."""
    principal = PrincipalContext(tenant_id=TENANT, user_id=USER, agent_id=None,
                                 roles=frozenset({"memory_writer"}), key_id="bench")
    full = make_plan(Intent.ANSWER)
    without = replace(full, sources=tuple(s for s in full.sources if s.type is not SourceType.KNOWLEDGE))
    times: dict[str, list[float]] = {"with": [], "without": []}
    order = (("with", full), ("without", without))
    for n, ask in enumerate(items):
        for name, plan in order if n % 2 == 0 else order[::-1]:
            with tenant_session(engine, TENANT) as s:
                now = datetime.now(UTC)
                ms, outcome = timed(build_bundle, s, principal, ask.request(plan), now)
            if name == "with":
                checked.check(corpus, ask, [(e.knowledge_id, e.version) for e in outcome.bundle.knowledge], now)
            else:
                assert not outcome.bundle.knowledge, "a plan without KNOWLEDGE carried knowledge"
            if n >= warmup:
                times[name].append(ms)
    return {name: percentiles(ms) for name, ms in times.items()}


def measure_api(api: httpx.Client, corpus: Corpus, items: Sequence[Ask], warmup: int,
                checked: Checked) -> dict[str, Any]:
    """``POST /memory-query`` (intent ANSWER), client-side round trip; every bundle's knowledge checked."""
    ms: list[float] = []
    for n, ask in enumerate(items):
        elapsed, response = timed(api.post, "/memory-query", json=ask.body())
        if response.status_code != 200:
            raise SystemExit(f"POST /memory-query {ask.body()}: {response.status_code} {response.text}")
        checked.check(corpus, ask, [(e["knowledge_id"], e["version"]) for e in response.json()["knowledge"]],
                      datetime.now(UTC))
        if n >= warmup:
            ms.append(elapsed)
    return percentiles(ms)


def wait_until_quiet(max_load: float, deadline: float) -> float:
    """Wait while the 1-minute load average is above ``max_load`` (a test suite may be running), until
    ``deadline`` (monotonic: one budget for the whole run); returns the load it stopped waiting at."""
    while (load := os.getloadavg()[0]) > max_load and time.monotonic() < deadline:
        say(f"  load average {load:.2f} > {max_load}: waiting")
        time.sleep(20)
    return load


# --------------------------------------------------------------------------- the run


def measure_size(engine: Engine, api: httpx.Client, corpus: Corpus, items: list[Ask], args: argparse.Namespace,
                 ) -> dict[str, Any]:
    """Plans, then the source alone, the bundle with and without it, the API; every bundle checked."""
    now = datetime.now(UTC)
    bare_keys = [r.content.key for r in corpus.rows[TENANT].values()
                 if r.content.key is not None and r.status == "ACTIVE" and r.content.scope_type is ScopeType.TENANT]
    plan = baseline_plan(engine, bare_keys[0])
    baseline_ok = f"Index Scan using {BASELINE_INDEX}" in plan
    # The fourth ask names keys and a project: every statement the source may run.
    source_plans = explain_source(engine, knowledge_query(items[3].request(make_plan(Intent.ANSWER))))
    checked = Checked()
    load = os.getloadavg()[0]
    source = measure_source(engine, corpus, items, bare_keys, args.warmup, checked)
    bundle = measure_bundle(engine, corpus, items[: args.bundle_queries], args.warmup, checked)
    http = measure_api(api, corpus, items[: args.bundle_queries], args.warmup, checked)
    active = sum(r.applies(None, now) is None for r in corpus.rows[TENANT].values())
    rows = corpus.rows[TENANT].values()
    barred = sum(not any(r.content.key == k and r.applies(a.project_id, now) is None for r in rows)
                 for a in items for k in a.keys)
    return {"barred_keys": barred, "baseline_plan": plan, "baseline_ok": baseline_ok, "source_plans": source_plans,
            "source": source, "bundle": bundle, "api": http, "checked": checked, "load": (load, os.getloadavg()[0]),
            "recallable_tenant_wide": active}


def report_size(size: int, f: dict[str, Any]) -> None:
    s, b = f["source"]["source"], f["source"]["bare"]
    w, wo, a, c = f["bundle"]["with"], f["bundle"]["without"], f["api"], f["checked"]
    say(f"  ── K = {size:,} knowledge rows in the tenant ({f['recallable_tenant_wide']:,} recallable tenant-wide "
        f"without a project), the same in {OTHER}; load {f['load'][0]:.2f} → {f['load'][1]:.2f} ──")
    say(f"    baseline (ACTIVE item of one key): {access(f['baseline_plan'])}")
    for (which, how), times in Counter((which, how) for which, how, _ in f["source_plans"]).items():
        say(f"    source statement {which:<24} {how}" + (f" (×{times})" if times > 1 else ""))
    say(f"    knowledge source alone   p50 {s['p50']:6.2f}  p95 {s['p95']:6.2f} ms (n={s['n']})")
    say(f"    bare key lookup          p50 {b['p50']:6.2f}  p95 {b['p95']:6.2f} ms")
    if f["baseline_ok"]:
        say(f"    source / bare: p50 {s['p50'] / b['p50']:.1f}×, p95 {s['p95'] / b['p95']:.1f}×")
    else:
        say(f"    no ratio: the baseline does not walk {BASELINE_INDEX}:\n{f['baseline_plan']}")
    say(f"    build_bundle with knowledge    p50 {w['p50']:6.2f}  p95 {w['p95']:6.2f} ms (n={w['n']})")
    say(f"    build_bundle without knowledge p50 {wo['p50']:6.2f}  p95 {wo['p95']:6.2f} ms")
    say(f"    with / without: p50 {w['p50'] / wo['p50']:.2f}×, p95 {w['p95'] / wo['p95']:.2f}× "
        f"(+{w['p50'] - wo['p50']:.2f} ms p50)")
    say(f"    POST /memory-query (ANSWER) p50 {a['p50']:6.2f}  p95 {a['p95']:6.2f} ms (n={a['n']}); the knowledge "
        f"source's p50 is {(w['p50'] - wo['p50']) / a['p50']:.0%} of it")
    say(f"    correctness: {c.bundles} bundles, {c.entries} knowledge entries, {len(c.violations)} violations; "
        f"{f['barred_keys']} keys named in the requests have no version that may be recalled there")
    for v in c.violations[:10]:
        say(f"      ✗ {v}")


def scan_plans(results: dict[int, dict[str, Any]]) -> Iterator[str]:
    """The source's statements that scan the table at the largest K, with their plans."""
    size = max(results)
    for which, how, plan in results[size]["source_plans"]:
        if "SEQ SCAN" in how:
            yield f"K = {size:,}, {which}:\n" + "\n".join("      " + line for line in plan.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,500,5000", help="comma-separated knowledge rows per tenant")
    parser.add_argument("--quick", action="store_true", help="K = 50, 500 and 60 queries")
    parser.add_argument("--base-texts", type=int, default=200, help="texts embedded for real")
    parser.add_argument("--noise", type=float, default=0.02, help="per-dimension σ added to the reused vectors")
    parser.add_argument("--memories", type=int, default=2000, help="memories in the tenant besides")
    parser.add_argument("--queries", type=int, default=300, help="per K: source-alone queries (after warm-up)")
    parser.add_argument("--bundle-queries", type=int, default=150, help="per K: bundle and API queries")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--max-load", type=float, default=2.5)
    parser.add_argument("--max-wait-minutes", type=float, default=15.0, help="for the whole run")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.queries, args.bundle_queries = "50,500", 60, 40
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    run_started = time.monotonic()
    say(f"knowledge recall benchmark: K = {sizes}; {os.cpu_count()} cores")
    quiet_deadline = time.monotonic() + args.max_wait_minutes * 60
    load_before = wait_until_quiet(args.max_load, quiet_deadline)
    with services("mnemo-bench-knowledge-") as svc:
        key = make_key(svc.sqlalchemy_url, TENANT, USER, ["memory_writer"])
        make_key(svc.sqlalchemy_url, OTHER, USER, ["memory_writer"])
        embedder = Embedder()
        texts = base_texts(args.base_texts)
        vectors = embed_all(embedder, texts, "base texts")
        say(f"  loading {args.memories:,} memories (bench/recall_latency.py's loader)")
        Loader(svc.conninfo, texts, vectors, args.noise).grow(TENANT, args.memories)
        engine = make_engine(svc.sqlalchemy_url, pool_size=2)
        corpus = Corpus(texts, vectors, args.noise, datetime.now(UTC))
        for tenant in (TENANT, OTHER):
            publish_real(engine, embedder, corpus, tenant)
            say(f"  {tenant}: {check_derivation(engine, corpus, tenant)} items published for real; the bulk "
                "derivation gives their exact search_text and tokens")
        results: dict[int, dict[str, Any]] = {}
        with httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
            for size in sizes:
                grow(engine, corpus, size)
                items = asks(embedder, corpus, args.warmup + args.queries)  # keys drawn from every row so far
                wait_until_quiet(args.max_load, quiet_deadline)
                say(f"  K = {corpus.count(TENANT):,}: measuring")
                results[corpus.count(TENANT)] = measure_size(engine, api, corpus, items, args)
                report_size(corpus.count(TENANT), results[corpus.count(TENANT)])
        engine.dispose()
    say("")
    say(f"mnemo knowledge recall: {os.cpu_count()} cores, load average {load_before:.2f} before the run, "
        f"{os.getloadavg()[0]:.2f} at the end; {args.base_texts} texts embedded for real, N(0, {args.noise}²) noise")
    say(f"{'K':>6} {'source p50':>10} {'p95':>6} {'bare p50':>9} {'p95':>6} {'ratio p95':>9} "
        f"{'bundle+K p50':>12} {'bundle-K p50':>12} {'added':>6} {'API p50':>8} {'p95':>7} {'violations':>10}")
    for size, f in results.items():
        s, b, w, wo, a = (f["source"]["source"], f["source"]["bare"], f["bundle"]["with"], f["bundle"]["without"],
                          f["api"])
        ratio = f"{s['p95'] / b['p95']:8.1f}×" if f["baseline_ok"] else f"{'refused':>9}"
        say(f"{size:>6,} {s['p50']:10.2f} {s['p95']:6.2f} {b['p50']:9.2f} {b['p95']:6.2f} {ratio} "
            f"{w['p50']:12.2f} {wo['p50']:12.2f} {w['p50'] / wo['p50']:5.2f}× {a['p50']:8.2f} {a['p95']:7.2f} "
            f"{len(f['checked'].violations):>10}")
    for scan in scan_plans(results):
        say(f"sequential scan at the largest K — {scan}")
    total = sum(f["checked"].entries for f in results.values())
    say(f"{total} knowledge entries checked in {sum(f['checked'].bundles for f in results.values())} bundles"
        + (" (none recalled: the check proved nothing)" if total == 0 else ""))
    say(f"total run time {(time.monotonic() - run_started) / 60:.1f} min")
    if any(f["checked"].violations for f in results.values()):
        raise SystemExit("a bundle carried knowledge it must not")


if __name__ == "__main__":
    main()
