"""LoCoMo evidence recall@k through mnemo's real ingest and recall paths (scored as the paper's Table 3).

LoCoMo (Maharana et al., ACL 2024; data CC BY-NC 4.0, read from ``--data``, never
copied) holds long two-person conversations and questions whose ``evidence``
names the dialog turns (``dia_id`` such as ``D1:3``) that answer them.

What this does, for any file in the LoCoMo format:

1. starts the embedded stack (PostgreSQL + pgvector, Temporal, worker, API) in a
   temporary directory, or uses the running services when ``MNEMO_DATABASE_URL``
   is set (API at ``MNEMO_API_URL``, else ``http://MNEMO_API_HOST:MNEMO_API_PORT``);
2. gives every conversation its own tenant (a ``memory_writer`` key each), so
   conversations never see each other;
3. ingests every turn over HTTP: ``POST /memory-events`` (the message) and
   ``POST /memory-candidates`` (one memory per turn, given as the ``message`` it
   comes from: speaker, text, an image's caption, the turn before it in the
   session as the message it replies to; the session date as its
   ``observed_at``; the ``dia_id`` as the evidence ref, which maps a hit back to
   its turn);
4. waits until every memory has its vector, filled by the worker's real
   ``EmbeddingSweep`` Temporal workflow (progress is printed);
5. asks ``POST /memory-query`` the raw question, for the largest k (``limit``),
   with ``retrieval`` = ``hybrid`` (the real path), ``lexical`` (full text +
   trigram) and ``semantic`` (vector only) for the ablations;
6. scores as the paper's evaluation code: per question, the fraction of its
   evidence ids among the top-k retrieved turns (a question without evidence
   counts 1, evidence strings are compared verbatim after dropping parentheses),
   averaged per category and overall, adversarial questions (category 5) included.

Usage: ``.venv/bin/python -m bench.locomo_recall --data PATH [--k 5,10,25,50] [--json OUT]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Services, make_key, say, services

DRAGON = {5: 0.567, 10: 0.662, 25: 0.767, 50: 0.827}
"""The paper's Table 3: DRAGON retriever, dialog turns as the retrieval unit."""
MODES = ("hybrid", "lexical", "semantic")
MODE_LABEL = {"hybrid": "hybrid (real path)", "lexical": "BM25-only (lexical)", "semantic": "vector-only"}
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""Category numbers as in the released file (the paper's names, as mapped by its authors' code)."""
MAX_LIMIT = 50
"""POST /memory-query injects at most 50 memories per request (RecallIn.limit)."""
WORKERS = 3
CANDIDATES_PER_K = 4
"""Each candidate source proposes 4× the memories asked for (200 for k = 50, the API's maximum): ranking can
only reorder what the sources found, and on LoCoMo a pool of 200 per source holds ~95 % of the evidence."""


# ---------------------------------------------------------------- the data ---


def sessions(conversation: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(session key, its date text, its turns) in session order; any number of sessions."""
    found = []
    for name, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", name)
        if match and isinstance(turns, list):
            found.append((int(match.group(1)), name, str(conversation.get(f"{name}_date_time", "")), turns))
    return [(name, date, turns) for _, name, date, turns in sorted(found)]


def parse_date(text: str) -> datetime | None:
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def turn_message(turn: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The turn as the message a memory comes from (POST /memory-candidates ``message``): who said what, what
    they shared (an image as its caption, as in the paper) and the turn before it in the session, which it
    answers; mnemo writes the memory's content from it."""
    caption = str(turn.get("blip_caption") or "").strip()
    return {"speaker": str(turn.get("speaker") or "?"), "text": str(turn.get("text", "")).strip(),
            **({"shared": [caption]} if caption else {}),
            **({"replying_to": turn_message(previous)} if previous is not None else {})}


def evidence_of(qa: dict[str, Any]) -> list[str]:
    return [str(e).replace("(", "").replace(")", "") for e in qa.get("evidence", [])]


def recall_at(retrieved: list[str], evidence: list[str], k: int) -> float:
    """The paper's fractional recall; a question without evidence counts as fully recalled (as its code does)."""
    if not evidence:
        return 1.0
    top = set(retrieved[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


# ------------------------------------------------------------- the vectors ---


def vector_progress(database_url: str, tenants: list[str]) -> tuple[int, int]:
    """(memories whose current version has a vector from the configured model, memories) over the benchmark
    tenants: the bundled one, or the endpoint of ``MNEMO_EMBEDDINGS_*`` (the stack's children read the same)."""
    from sqlalchemy import text

    from memory.db import make_engine, tenant_session
    from memory.embedders import model_of
    from memory.embedders.settings import ModelSettings

    model, _ = model_of(ModelSettings())
    engine = make_engine(database_url, pool_size=1)
    done = total = 0
    try:
        for tenant in tenants:
            with tenant_session(engine, tenant) as session:
                row = session.execute(
                    text(
                        "SELECT count(*) FILTER (WHERE s.embedding IS NOT NULL AND s.embedding_model = :model"
                        "   AND s.embedding_revision = m.revision), count(*)"
                        " FROM memory_search s JOIN memories m ON m.tenant_id = s.tenant_id"
                        "  AND m.memory_id = s.memory_id AND m.version = s.version"
                        " WHERE s.tenant_id = :tenant AND m.status = 'ACTIVE'"
                    ),
                    {"model": model, "tenant": tenant},
                ).one()
                done, total = done + int(row[0]), total + int(row[1])
    finally:
        engine.dispose()
    return done, total


def wait_for_vectors(svc: Services, tenants: list[str]) -> float:
    """Seconds until every memory of ``tenants`` has its vector from the worker's real EmbeddingSweep workflow."""
    say("vectors: waiting for the worker's EmbeddingSweep workflow to embed every memory")
    t0, last = time.monotonic(), 0.0
    while True:
        done, total = vector_progress(svc.sqlalchemy_url, tenants)
        if done >= total:
            break
        if svc.stack is not None:
            svc.stack.check_children()
        if time.monotonic() - last >= 15:
            last = time.monotonic()
            say(f"  vectors: {done}/{total} ({done / max(last - t0, 1e-9):.1f}/s since ingest ended)")
        time.sleep(2)
    waited = time.monotonic() - t0
    say(f"  vectors: {done}/{total} in {waited:.0f}s")
    return waited


# ------------------------------------------------------------------ phases ---


class Progress:
    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self.started = self.last = time.monotonic()
        self.lock = threading.Lock()

    def tick(self, n: int = 1) -> None:
        with self.lock:
            self.done += n
            now = time.monotonic()
            if now - self.last >= 10 or self.done == self.total:
                self.last = now
                rate = self.done / max(now - self.started, 1e-9)
                eta = (self.total - self.done) / rate if rate else float("inf")
                say(f"  {self.label}: {self.done}/{self.total} ({rate:.1f}/s, ~{eta:.0f}s left)")


def run_parallel(jobs: Iterable[Callable[[], None]], workers: int = WORKERS) -> None:
    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    for attempt in range(5):
        try:
            response = client.post(path, json=body)
        except httpx.TransportError:
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
            continue
        if response.status_code >= 400:
            raise SystemExit(f"POST {path} answered {response.status_code}: {response.text[:500]}")
        return response.json()  # type: ignore[no-any-return]
    raise AssertionError("unreachable")


def ingest(client: httpx.Client, sample_id: str, conversation: dict[str, Any], progress: Progress) -> None:
    now = datetime.now(UTC)
    for session_name, date, turns in sessions(conversation):
        when = parse_date(date) or now
        for place, turn in enumerate(turns):
            dia_id = str(turn["dia_id"])
            post(client, "/memory-events", {
                "idempotency_key": f"{sample_id}:{dia_id}", "kind": "MESSAGE", "occurred_at": when.isoformat(),
                "session_id": session_name,
                "payload": {"speaker": turn.get("speaker"), "text": turn.get("text"), "dia_id": dia_id,
                            "session_date": date, **({"image_caption": turn["blip_caption"]}
                                                     if turn.get("blip_caption") else {})},
            })
            post(client, "/memory-candidates", {
                "category": "EVENT", "space": "USER", "source_level": "E2",
                "message": turn_message(turn, turns[place - 1] if place else None),
                "idempotency_key": f"{sample_id}:{dia_id}",
                "source": {"source_id": f"{sample_id}:{dia_id}", "source_type": "CONVERSATION_TURN",
                           "captured_at": when.isoformat(), "evidence_refs": [dia_id]},
                "validity": {"observed_at": when.isoformat()},
            })
            progress.tick()


def query(client: httpx.Client, question: str, mode: str, limit: int,
          candidates: int | None = None) -> tuple[list[str], bool]:
    """The dia_ids of the bundle's memories in rank order, and whether the budget truncated the bundle.
    ``candidates``: per source (default :data:`CANDIDATES_PER_K` × ``limit``, at most the API's 200)."""
    bundle = post(client, "/memory-query", {
        "query": question, "intent": "ANSWER", "retrieval": mode, "limit": limit,
        "candidate_limit": candidates or min(CANDIDATES_PER_K * limit, 200), "token_budget": 100_000,
        "min_relevance": 0.0,
    })
    return dia_ids(bundle), bool(bundle["truncated_by_budget"])


def dia_ids(bundle: dict[str, Any]) -> list[str]:
    """The dia_ids of a bundle's memories in rank order (published knowledge is its own section: none here)."""
    ids = []
    for item in bundle["items"]:
        refs = item["source_refs"][1:]  # [source_id, *evidence_refs]
        ids.append(refs[0] if refs else item["source_refs"][0])
    return ids


# ----------------------------------------------------------------- scoring ---


def score(results: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    """{"overall": {k: r}, "per_category": {cat: {k: r}}, "counts": {cat: n}} with recall as a fraction."""
    overall: dict[str, float] = {}
    per_category: dict[str, dict[str, float]] = defaultdict(dict)
    counts: dict[str, int] = defaultdict(int)
    for r in results:
        counts[str(r["category"])] += 1
    for k in ks:
        values = [recall_at(r["retrieved"], r["evidence"], k) for r in results]
        overall[str(k)] = sum(values) / len(values) if values else 0.0
        by_cat: dict[str, list[float]] = defaultdict(list)
        for r, v in zip(results, values, strict=True):
            by_cat[str(r["category"])].append(v)
        for cat, vs in by_cat.items():
            per_category[cat][str(k)] = sum(vs) / len(vs)
    return {"overall": overall, "per_category": dict(sorted(per_category.items())),
            "counts": dict(sorted(counts.items()))}


def table(title: str, scored: dict[str, Any], ks: list[int]) -> list[str]:
    lines = [title, f"  {'':<24}" + "".join(f"{'R@' + str(k):>9}" for k in ks)]
    for cat, values in scored["per_category"].items():
        name = CATEGORY_NAMES.get(int(cat), "") if cat.isdigit() else ""
        label = f"cat {cat} {name} (n={scored['counts'][cat]})"
        lines.append(f"  {label:<24}" + "".join(f"{100 * values[str(k)]:9.1f}" for k in ks))
    lines.append(f"  {'overall':<24}" + "".join(f"{100 * scored['overall'][str(k)]:9.1f}" for k in ks))
    return lines


# -------------------------------------------------------------------- main ---


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file (a list of samples)")
    parser.add_argument("--k", default="5,10,25,50", help="comma-separated cut-offs (at most 50)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    if not ks or ks[0] < 1 or ks[-1] > MAX_LIMIT:
        raise SystemExit(f"--k values must be between 1 and {MAX_LIMIT} "
                         f"(POST /memory-query returns at most {MAX_LIMIT})")
    samples = json.loads(args.data.read_text())
    if isinstance(samples, dict):
        samples = [samples]
    run = uuid.uuid4().hex[:8]
    tenants = {}
    for n, sample in enumerate(samples):
        sample_id = str(sample.get("sample_id", n))
        tenants[sample_id] = f"locomo-{run}-{re.sub('[^a-z0-9_-]', '-', sample_id.lower())}"[:63]
    n_turns = sum(len(t) for s in samples for _, _, t in sessions(s["conversation"]))
    n_questions = sum(len(s.get("qa", [])) for s in samples)
    say(f"LoCoMo recall: {len(samples)} conversations, {n_turns} turns, {n_questions} questions, k = {ks}")

    with services("mnemo-locomo-") as svc:
        if svc.stack is None:
            say(f"using the running services: API {svc.api_url}")
        began = time.monotonic()
        keys = {tenant: make_key(svc.sqlalchemy_url, tenant, "locomo", ["memory_writer"])
                for tenant in tenants.values()}
        clients = {sid: httpx.Client(base_url=svc.api_url, timeout=120,
                                     headers={"Authorization": f"Bearer {keys[tenant]}"})
                   for sid, tenant in tenants.items()}

        say("ingest: POST /memory-events + POST /memory-candidates per turn")
        progress = Progress("turns ingested", n_turns)
        t0 = time.monotonic()
        run_parallel([
            partial(ingest, clients[sid], sid, s["conversation"], progress)
            for sid, s in ((str(s.get("sample_id", n)), s) for n, s in enumerate(samples))
        ])
        ingest_s = time.monotonic() - t0

        embed_s = wait_for_vectors(svc, list(tenants.values()))
        say(f"  (ingest took {ingest_s:.0f}s)")

        limit = ks[-1]
        say(f"recall: POST /memory-query per question x {len(MODES)} modes, limit {limit}")
        questions = [(sid, qa) for n, s in enumerate(samples) for sid in [str(s.get("sample_id", n))]
                     for qa in s.get("qa", [])]
        results: dict[str, list[dict[str, Any]]] = {m: [None] * len(questions) for m in MODES}  # type: ignore[list-item]
        truncated = {m: 0 for m in MODES}
        qprogress = Progress("questions", len(questions))
        t0 = time.monotonic()

        def ask(i: int, sid: str, qa: dict[str, Any]) -> None:
            for mode in MODES:
                retrieved, cut = query(clients[sid], str(qa["question"]), mode, limit)
                truncated[mode] += cut
                results[mode][i] = {"sample_id": sid, "category": qa.get("category"), "evidence": evidence_of(qa),
                                    "retrieved": retrieved}
            qprogress.tick()

        run_parallel([partial(ask, i, sid, qa) for i, (sid, qa) in enumerate(questions)])
        query_s = time.monotonic() - t0

    scored = {mode: score(results[mode], ks) for mode in MODES}
    lines = [
        f"LoCoMo evidence recall@k: {len(questions)} questions over {len(samples)} conversations ({n_turns} turns), "
        f"{os.cpu_count()} cores; ingest {ingest_s:.0f}s, vectors +{embed_s:.0f}s, "
        f"queries {query_s:.0f}s ({len(MODES) * len(questions) / query_s:.1f} req/s); "
        f"total {time.monotonic() - began:.0f}s",
    ]
    for mode in MODES:
        title = f"{MODE_LABEL[mode]} (bundles cut by the token budget: {truncated[mode]})"
        lines += ["", *table(title, scored[mode], ks)]
    lines += ["", f"  {'DRAGON (paper, Table 3)':<24}" + "".join(
        f"{100 * DRAGON[k]:9.1f}" if k in DRAGON else f"{'-':>9}" for k in ks)]
    lines.append(f"  {'hybrid - DRAGON':<24}" + "".join(
        f"{100 * (scored['hybrid']['overall'][str(k)] - DRAGON[k]):+9.1f}" if k in DRAGON else f"{'-':>9}" for k in ks))
    say("\n".join(lines))

    if args.json:
        out = {
            "overall": scored["hybrid"]["overall"],
            "per_category": scored["hybrid"]["per_category"],
            "questions": len(questions),
            "category_counts": scored["hybrid"]["counts"],
            "ablations": {"lexical": {k: scored["lexical"][k] for k in ("overall", "per_category")},
                          "semantic": {k: scored["semantic"][k] for k in ("overall", "per_category")}},
            "dragon": {str(k): v for k, v in DRAGON.items()},
            "run": {"conversations": len(samples), "turns": n_turns, "cores": os.cpu_count(),
                    "ingest_seconds": round(ingest_s, 1), "embedding_wait_seconds": round(embed_s, 1),
                    "query_seconds": round(query_s, 1), "truncated_by_budget": truncated},
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        say(f"wrote {args.json}")


if __name__ == "__main__":
    main()
