"""LoCoMo through sessions and ``session.commit``: what the extractor keeps, and what recall finds in it.

bench/locomo_recall.py stores every LoCoMo turn as a memory; real agents hand mnemo conversations, and a
commit turns each stage into a few memories and a structured summary. This measures, in one run:

(a) **observation coverage**: the share of LoCoMo's annotated ``observation`` facts (per session and
    speaker, each with the dia_ids that support it) of which at least one dia_id is cited by a memory a
    commit created or merged or a "remember this" wrote as its message arrived (its ``evidence_refs``), by
    a summary item (its ``source_event_ids``), or by either;
(b) **evidence recall@k over the derived memories only**: the QA questions asked through ``POST
    /memory-query`` in the tenant that holds nothing but what the commits wrote. A hit counts every dia_id
    its ``evidence_refs`` cite. Summaries are not memories: recall never returns them, so they are not in
    this figure (they count in (a));
(c) the same over **raw turns**, today's figure: every turn a memory, ingested as bench/locomo_recall.py
    does, in the same run, into tenants of their own;
(d) **commit latency** (``POST /sessions/{id}/commit`` until a terminal status) p50/p95 per session, and
    the messages/s of ``POST /sessions/{id}/messages``. A commit the policy's thresholds started by
    themselves (the messages answer names it) is waited for instead of a commit of the bench's own.

Speakers. LoCoMo's conversations are between two people; the rules extractor takes facts only from ``user``
messages (an assistant's sentence about the user is at most an E4 guess, never ACTIVE). So each
conversation's tenant has two mnemo users, one per speaker, and every LoCoMo session is ingested twice, once
from each speaker's side: in speaker A's mnemo session A's turns are ``user`` messages and B's are
``assistant`` messages, and the other way round in B's. Each person's statements become their own
memories (E2), never the other's (a ``profile.city`` of one speaker must not supersede the other's).
Sessions are committed in LoCoMo's order, one commit per session, so that later sessions merge into and
supersede what earlier ones stored, as they would for a real user.

Recall then has two memory spaces per conversation, one per speaker, and a question is asked in both (one
``POST /memory-query`` per speaker key, same parameters as bench/locomo_recall.py). Scores are z-scores
within one request, so the two ranked lists are fused by rank, two ways: **routed** — a question that names
exactly one of the speakers (most LoCoMo questions do: "When did Caroline ...") takes that speaker's list
first and the other's after it, any other question is interleaved; **interleaved** — always one hit of A,
one of B, ... (neutral, no use of the names). The raw-turn baseline is one list of one user, as in
bench/locomo_recall.py.

Usage: ``.venv/bin/python -m bench.locomo_extraction --data PATH [--json OUT] [--conversations N]
[--k 5,10,25,50] [--commit-timeout SECONDS]``. It starts the embedded stack (temp dir) or uses the running
services when ``MNEMO_DATABASE_URL`` is set, as every benchmark does (bench/harness.py); the extractor is
the one the worker's settings choose (``rules`` by default), named in the output.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.harness import make_key, percentile, say, services
from bench.locomo_recall import (
    CANDIDATES_PER_K,
    MAX_LIMIT,
    Progress,
    evidence_of,
    ingest,
    parse_date,
    post,
    query,
    run_parallel,
    score,
    sessions,
    table,
    wait_for_vectors,
)

TERMINAL = frozenset({"completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion"})
"""The commit statuses a commit ends in (GET /sessions/{id}/commits/{commit_id})."""
SIDES = ("a", "b")
POLL_SECONDS = 0.25
UNCUT = sys.maxsize
"""A cut-off beyond any list: ``score`` then counts the whole list it is given (see :func:`score_hits`)."""
EVENT_REF = re.compile(r"event:([0-9a-fA-F-]{36})")


# ---------------------------------------------------------------- the data ---


def dia_ids_of(raw: Any) -> list[str]:
    """An observation's evidence as the file spells it: one id, a list, or ids joined by commas."""
    parts = raw if isinstance(raw, list) else str(raw).split(",")
    return [str(part).strip() for part in parts if str(part).strip()]


def observations(sample: dict[str, Any]) -> list[list[str]]:
    """The dia_ids of each annotated observation fact of a sample, over all its sessions and speakers."""
    facts = []
    for per_speaker in sample.get("observation", {}).values():
        for items in per_speaker.values():
            facts += [dia_ids_of(item[1]) for item in items if len(item) > 1]
    return facts


def message_text(turn: dict[str, Any]) -> str:
    """What the speaker said (an image as its caption, as the paper does); who and when are the message's
    role and ``created_at``, not part of its text."""
    text = str(turn.get("text", "")).strip()
    return f"{text} [shares {turn['blip_caption']}]".strip() if turn.get("blip_caption") else text


def session_messages(session_id: str, date: str, turns: list[dict[str, Any]], speaker: str) -> list[dict[str, Any]]:
    """One LoCoMo session as the messages of ``speaker``'s mnemo session: their turns ``user``, the other's
    ``assistant``; one second apart from the session's date, so their order is the conversation's. Keys name
    the mnemo session: an idempotency key is unique in the tenant, and both sides share one."""
    start = parse_date(date)
    if start is None:
        raise SystemExit(f"{session_id}: cannot read its date {date!r}")
    return [
        {"idempotency_key": f"{session_id}:{turn['dia_id']}",
         "role": "user" if turn.get("speaker") == speaker else "assistant",
         "content": message_text(turn), "created_at": (start + timedelta(seconds=i)).isoformat()}
        for i, turn in enumerate(turns)
    ]


# ----------------------------------------------------------- the sessions ---


def get(client: httpx.Client, path: str, missing_ok: bool = False) -> dict[str, Any] | None:
    """GET with the retries ``post`` has; a 404 is None when ``missing_ok``, any other error ends the run."""
    for attempt in range(5):
        try:
            response = client.get(path)
        except httpx.TransportError:
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
            continue
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code >= 400:
            raise SystemExit(f"GET {path} answered {response.status_code}: {response.text[:500]}")
        return response.json()  # type: ignore[no-any-return]
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Side:
    """One speaker's view of one conversation: whose turns are ``user`` messages, and their key's client."""

    sample_id: str
    side: str
    speaker: str
    client: httpx.Client


@dataclass
class SideRun:
    """What ingesting and committing one side's sessions produced."""

    messages: int = 0
    post_seconds: float = 0.0
    commit_ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    stats: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    levels: Counter[str] = field(default_factory=Counter)
    extractors: set[str] = field(default_factory=set)
    dia_of_event: dict[str, str] = field(default_factory=dict)
    memory_events: set[str] = field(default_factory=set)
    """Event ids cited by the memories the commits created or merged."""
    active_memory_events: set[str] = field(default_factory=set)
    summary_events: set[str] = field(default_factory=set)


def wait_for_commit(client: httpx.Client, path: str, timeout: float, check: Callable[[], None]) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        commit = get(client, path)
        assert commit is not None
        if commit["status"] in TERMINAL:
            return commit
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} is still {commit['status']!r} after {timeout:.0f}s (--commit-timeout)")
        check()
        time.sleep(POLL_SECONDS)


def record_memories(run: SideRun, entries: list[dict[str, Any]]) -> None:
    """Memories written (a commit's created and merged, or an E1 written as its message arrived): their level
    and the events they cite."""
    for entry in entries:
        cited = {ref.removeprefix("event:") for ref in entry.get("evidence_refs", [])}
        run.levels[entry.get("source_level", "E1")] += 1  # a replayed 'remember' names no level: E1 by rule
        run.memory_events |= cited
        if entry.get("status", "ACTIVE") != "CANDIDATE":  # a merge is written ACTIVE or refused
            run.active_memory_events |= cited


def record_commit(run: SideRun, commit: dict[str, Any], summary: dict[str, Any] | None) -> None:
    run.statuses[commit["status"]] += 1
    stats = commit.get("stats", {})
    for name in ("candidates", "memories_extracted", "memories_merged", "memories_skipped", "prompt_tokens"):
        run.stats[name] += int(stats.get(name, 0))
    run.rejected.update({reason: int(n) for reason, n in stats.get("rejected", {}).items()})
    if "extractor" in stats:
        run.extractors.add(str(stats["extractor"]))
    record_memories(run, [*commit["memories"].get("created", []), *commit["memories"].get("merged", [])])
    for section in (summary or {}).values():
        if isinstance(section, list):
            run.summary_events |= {e for item in section if isinstance(item, dict)
                                   for e in item.get("source_event_ids", [])}


def ingest_side(
    side: Side, conversation: dict[str, Any], timeout: float, check: Callable[[], None], progress: Progress
) -> SideRun:
    """Each session of the conversation in order: open it, post its messages, commit, wait for the commit."""
    run = SideRun()
    client = side.client
    for session_name, date, turns in sessions(conversation):
        if not turns:
            continue
        session_id = f"{session_name}-{side.side}"
        post(client, "/sessions", {"session_id": session_id, "title": f"{side.sample_id} {session_name}"})
        messages = session_messages(session_id, date, turns, side.speaker)
        posted_at = time.perf_counter()
        stored = post(client, f"/sessions/{session_id}/messages", {"messages": messages})
        run.post_seconds += time.perf_counter() - posted_at
        run.messages += len(messages)
        for event, turn in zip(stored["events"], turns, strict=True):
            run.dia_of_event[str(event["event_id"])] = str(turn["dia_id"])
        record_memories(run, [m for m in stored.get("remembered", []) if m.get("decision") != "SKIP"])
        started = stored.get("commit")  # the commit policy's thresholds can start one by themselves
        t0 = posted_at if started else time.perf_counter()  # a policy commit began inside the messages POST
        commit_id = started["commit_id"] if started else f"{session_id}-commit"
        if not started:
            post(client, f"/sessions/{session_id}/commit", {"commit_id": commit_id})
        commit = wait_for_commit(client, f"/sessions/{session_id}/commits/{commit_id}", timeout, check)
        run.commit_ms.append((time.perf_counter() - t0) * 1000)
        record_commit(run, commit, get(client, f"/sessions/{session_id}/summaries/latest", missing_ok=True))
        progress.tick()
    return run


# ------------------------------------------------------------------ recall ---


def cited_dia_ids(client: httpx.Client, question: str, limit: int, dia_of_event: dict[str, str]) -> list[list[str]]:
    """The dia_ids each bundle item's evidence refs cite, in rank order (the request of locomo_recall.query)."""
    bundle = post(client, "/memory-query", {
        "query": question, "intent": "ANSWER", "retrieval": "hybrid", "limit": limit,
        "candidate_limit": min(CANDIDATES_PER_K * limit, 200), "token_budget": 100_000, "min_relevance": 0.0,
    })
    return [
        [dia_of_event[m.group(1)] for ref in item["source_refs"] if (m := EVENT_REF.fullmatch(ref))
         and m.group(1) in dia_of_event]
        for item in bundle["items"]
    ]


def interleaved(lists: Sequence[list[list[str]]]) -> list[list[str]]:
    """One hit of each list in turn, then the rest of the longer ones."""
    fused = []
    for rank in range(max((len(hits) for hits in lists), default=0)):
        fused += [hits[rank] for hits in lists if rank < len(hits)]
    return fused


def routed(question: str, speakers: Sequence[str], lists: Sequence[list[list[str]]]) -> list[list[str]]:
    """The list of the one speaker the question names first, then the other's; interleaved otherwise."""
    named = [i for i, name in enumerate(speakers) if re.search(rf"\b{re.escape(name)}\b", question, re.IGNORECASE)]
    if len(named) != 1:
        return interleaved(lists)
    return [*lists[named[0]], *(hit for i, hits in enumerate(lists) if i != named[0] for hit in hits)]


def score_hits(results: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    """``locomo_recall.score`` for hits that cite several turns each: at k, every dia_id the top k hits cite
    counts (the paper's fractional recall over that set)."""
    per_k = {k: score([{**r, "retrieved": [d for hit in r["hits"][:k] for d in hit]} for r in results], [UNCUT])
             for k in ks}
    first = per_k[ks[0]]
    return {
        "overall": {str(k): per_k[k]["overall"][str(UNCUT)] for k in ks},
        "per_category": {cat: {str(k): per_k[k]["per_category"][cat][str(UNCUT)] for k in ks}
                         for cat in first["per_category"]},
        "counts": first["counts"],
    }


# -------------------------------------------------------------- reporting ---


def coverage(facts: Iterable[list[str]], cited: set[str]) -> float:
    """The share of facts of which at least one supporting dia_id is cited."""
    listed = list(facts)
    return sum(1 for ids in listed if cited.intersection(ids)) / len(listed) if listed else 0.0


def milliseconds(values: Sequence[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 0.5), 1), "p95": round(percentile(values, 0.95), 1),
            "max": round(max(values), 1) if values else float("nan"), "n": len(values)}


def tenant_name(prefix: str, run: str, sample_id: str) -> str:
    return f"{prefix}-{run}-{re.sub('[^a-z0-9_-]', '-', sample_id.lower())}"[:63]


def user_name(speaker: str, side: str) -> str:
    return f"speaker-{side}-{re.sub('[^a-z0-9_-]', '-', speaker.lower())}"[:63]


# -------------------------------------------------------------------- main ---


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file (a list of samples)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--conversations", type=int, help="only the first N conversations (default: all)")
    parser.add_argument("--k", default="5,10,25,50", help=f"comma-separated cut-offs (at most {MAX_LIMIT})")
    parser.add_argument("--commit-timeout", type=float, default=600.0, help="seconds one commit may take")
    args = parser.parse_args()
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    if not ks or ks[0] < 1 or ks[-1] > MAX_LIMIT:
        raise SystemExit(f"--k values must be between 1 and {MAX_LIMIT} (POST /memory-query returns at most that)")
    samples = json.loads(args.data.read_text())
    samples = [samples] if isinstance(samples, dict) else samples
    if args.conversations is not None:
        if args.conversations < 1:
            raise SystemExit("--conversations must be at least 1")
        samples = samples[: args.conversations]
    ids = [str(s.get("sample_id", n)) for n, s in enumerate(samples)]
    by_id = dict(zip(ids, samples, strict=True))
    run_id = uuid.uuid4().hex[:8]
    n_sessions = sum(1 for s in samples for _, _, turns in sessions(s["conversation"]) if turns)
    n_turns = sum(len(turns) for s in samples for _, _, turns in sessions(s["conversation"]))
    questions = [(sid, qa) for sid in ids for qa in by_id[sid].get("qa", [])]
    say(f"LoCoMo extraction: {len(samples)} conversations, {n_sessions} sessions, {n_turns} turns "
        f"(each ingested from both speakers' sides), {len(questions)} questions, k = {ks}")

    with services("mnemo-locomo-extraction-") as svc:
        if svc.stack is None:
            say(f"using the running services: API {svc.api_url}")
        stack = svc.stack
        check: Callable[[], None] = stack.check_children if stack is not None else (lambda: None)
        began = time.monotonic()
        clients: list[httpx.Client] = []

        def client_for(tenant: str, user: str) -> httpx.Client:
            key = make_key(svc.sqlalchemy_url, tenant, user, ["memory_writer"])
            clients.append(httpx.Client(base_url=svc.api_url, timeout=120,
                                        headers={"Authorization": f"Bearer {key}"}))
            return clients[-1]

        derived_tenants = {sid: tenant_name("locomo-x", run_id, sid) for sid in ids}
        raw_tenants = {sid: tenant_name("locomo-raw", run_id, sid) for sid in ids}
        sides = {sid: [Side(sid, side, name, client_for(derived_tenants[sid], user_name(name, side)))
                       for side, name in zip(SIDES, (by_id[sid]["conversation"]["speaker_a"],
                                                     by_id[sid]["conversation"]["speaker_b"]), strict=True)]
                 for sid in ids}
        raw_clients = {sid: client_for(raw_tenants[sid], "locomo") for sid in ids}

        say("sessions: per speaker side, each session opened, its messages posted, committed, waited for")
        side_runs: dict[tuple[str, str], SideRun] = {}
        lock = threading.Lock()
        progress = Progress("sessions committed", 2 * n_sessions)

        def one_side(side: Side) -> None:
            result = ingest_side(side, by_id[side.sample_id]["conversation"], args.commit_timeout, check, progress)
            with lock:
                side_runs[(side.sample_id, side.side)] = result

        t0 = time.monotonic()
        run_parallel([partial(one_side, side) for sid in ids for side in sides[sid]])
        sessions_s = time.monotonic() - t0

        say("raw turns: POST /memory-events + POST /memory-candidates per turn (bench/locomo_recall.py's ingest)")
        raw_progress = Progress("turns ingested", n_turns)
        t0 = time.monotonic()
        run_parallel([partial(ingest, raw_clients[sid], sid, by_id[sid]["conversation"], raw_progress) for sid in ids])
        raw_s = time.monotonic() - t0

        embed_s = wait_for_vectors(svc, [*derived_tenants.values(), *raw_tenants.values()])

        dia_of_event = {sid: {e: d for side in SIDES for e, d in side_runs[(sid, side)].dia_of_event.items()}
                        for sid in ids}
        limit = ks[-1]
        say(f"recall: POST /memory-query per question, per speaker (derived) and once (raw turns), limit {limit}")
        empty: dict[str, Any] = {}
        results = {name: [empty] * len(questions) for name in ("routed", "interleaved", "raw")}
        qprogress = Progress("questions", len(questions))

        def ask(i: int, sid: str, qa: dict[str, Any]) -> None:
            question, base = str(qa["question"]), {"category": qa.get("category"), "evidence": evidence_of(qa)}
            lists = [cited_dia_ids(side.client, question, limit, dia_of_event[sid]) for side in sides[sid]]
            speakers = [side.speaker for side in sides[sid]]
            results["routed"][i] = {**base, "hits": routed(question, speakers, lists)}
            results["interleaved"][i] = {**base, "hits": interleaved(lists)}
            results["raw"][i] = {**base, "retrieved": query(raw_clients[sid], question, "hybrid", limit)[0]}
            qprogress.tick()

        t0 = time.monotonic()
        run_parallel([partial(ask, i, sid, qa) for i, (sid, qa) in enumerate(questions)])
        query_s = time.monotonic() - t0
        for client in clients:
            client.close()

    total = SideRun()
    for r in side_runs.values():
        total.messages += r.messages
        total.post_seconds += r.post_seconds
        total.commit_ms += r.commit_ms
        for mine, theirs in ((total.statuses, r.statuses), (total.stats, r.stats), (total.rejected, r.rejected),
                             (total.levels, r.levels)):
            mine.update(theirs)
        total.extractors |= r.extractors

    def cited(events: Callable[[SideRun], set[str]]) -> dict[str, set[str]]:
        return {sid: {dia_of_event[sid][e] for side in SIDES for e in events(side_runs[(sid, side)])
                      if e in dia_of_event[sid]} for sid in ids}

    by_memories = cited(lambda r: r.memory_events)
    by_active = cited(lambda r: r.active_memory_events)
    by_summaries = cited(lambda r: r.summary_events)
    facts = {sid: observations(by_id[sid]) for sid in ids}
    n_facts = sum(len(f) for f in facts.values())

    def share(chosen: dict[str, set[str]]) -> float:
        return sum(coverage(facts[sid], chosen[sid]) * len(facts[sid]) for sid in ids) / n_facts if n_facts else 0.0

    covered = {"memories": share(by_memories), "active_memories": share(by_active),
               "summaries": share(by_summaries),
               "either": share({sid: by_memories[sid] | by_summaries[sid] for sid in ids})}
    scored = {"routed": score_hits(results["routed"], ks), "interleaved": score_hits(results["interleaved"], ks),
              "raw": score(results["raw"], ks)}
    latency = milliseconds(total.commit_ms)
    ingest_rate = total.messages / total.post_seconds if total.post_seconds else 0.0
    extractor = ", ".join(sorted(total.extractors)) or "not reported"

    lines = [
        f"LoCoMo extraction ({extractor} extractor): {len(samples)} conversations, {n_sessions} sessions x 2 sides, "
        f"{total.messages} messages, {len(questions)} questions, {os.cpu_count()} cores; sessions {sessions_s:.0f}s, "
        f"raw ingest {raw_s:.0f}s, vectors +{embed_s:.0f}s, queries {query_s:.0f}s; "
        f"total {time.monotonic() - began:.0f}s",
        "",
        f"(a) observation coverage ({n_facts} annotated facts; covered = one of its dia_ids cited)",
        f"  {'by memories (created or merged)':<40}{100 * covered['memories']:9.1f}",
        f"  {'  of them ACTIVE (not E4 candidates)':<40}{100 * covered['active_memories']:9.1f}",
        f"  {'by summary items':<40}{100 * covered['summaries']:9.1f}",
        f"  {'by either':<40}{100 * covered['either']:9.1f}",
        "",
        *table("(b) evidence recall@k over the derived memories, routed by the speaker a question names",
               scored["routed"], ks),
        "",
        *table("(b') the same, the two speakers' lists interleaved", scored["interleaved"], ks),
        "",
        *table("(c) evidence recall@k over raw turns (every turn a memory)", scored["raw"], ks),
        "",
        f"  {'derived (routed) - raw':<24}" + "".join(
            f"{100 * (scored['routed']['overall'][str(k)] - scored['raw']['overall'][str(k)]):+9.1f}" for k in ks),
        "",
        f"(d) commits: {latency['n']}, latency p50 {latency['p50']:.0f} ms, p95 {latency['p95']:.0f} ms, "
        f"max {latency['max']:.0f} ms; statuses {dict(sorted(total.statuses.items()))}",
        f"    ingest: {total.messages} messages, {ingest_rate:.1f} messages/s within POST /sessions/{{id}}/messages "
        f"(one session per request), {total.messages / sessions_s:.1f} messages/s end to end with the commits",
        f"    memories: {total.stats['memories_extracted']} created, {total.stats['memories_merged']} merged, "
        f"{total.stats['memories_skipped']} skipped of {total.stats['candidates']} candidates; by source level "
        f"{dict(sorted(total.levels.items()))}; refused {dict(sorted(total.rejected.items()))}",
    ]
    say("\n".join(lines))

    if args.json:
        out = {
            "extractor": extractor,
            "observation_coverage": covered,
            "observations": n_facts,
            "recall_derived_routed": scored["routed"],
            "recall_derived_interleaved": scored["interleaved"],
            "recall_raw_turns": scored["raw"],
            "commit_latency_ms": latency,
            "commit_statuses": dict(sorted(total.statuses.items())),
            "memories": {**{k: total.stats[k] for k in ("candidates", "memories_extracted", "memories_merged",
                                                        "memories_skipped", "prompt_tokens")},
                         "by_source_level": dict(sorted(total.levels.items())),
                         "rejected": dict(sorted(total.rejected.items()))},
            "ingest": {"messages": total.messages, "messages_per_second": round(ingest_rate, 1),
                       "messages_per_second_with_commits": round(total.messages / sessions_s, 1)},
            "run": {"conversations": len(samples), "sessions": n_sessions, "turns": n_turns,
                    "questions": len(questions), "cores": os.cpu_count(), "sessions_seconds": round(sessions_s, 1),
                    "raw_ingest_seconds": round(raw_s, 1), "embedding_wait_seconds": round(embed_s, 1),
                    "query_seconds": round(query_s, 1)},
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        say(f"wrote {args.json}")


if __name__ == "__main__":
    main()
