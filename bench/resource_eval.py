"""The resource layer's eval (seed 000 §6): the seed's cases through the real API and the real MCP client.

A deterministic bilingual personal-assistant corpus (bench/assistant_corpus.py: 2,210 records, 60 whole
meetings with 30k–120k-character transcripts) is written through ``PUT /records``; an admin sets per-agent
policies; the trusted runtime registers runs; then, for every meeting, through REST and through MCP alike:

- **conclusion**: ``search(topic)`` must rank the meeting's episode; ``read`` it and find its decision;
- **open todos**: ``search(topic, resource=todo)`` must rank its two open todos, ``list(todo, episode=…,
  status=open)`` must return exactly them, and ``read`` must say each one's current status (one is done);
- **original quote**: ``read(transcript)`` page by page to ``complete: true``; every page ≤ 65,536 bytes, the
  reassembled text equal to the source, the quote found at its offset;
- **re-read after revocation**: a run reads a transcript's first page, an admin revokes the agent's
  transcript policy, the next page must be refused;
- **keyword only in a forbidden field**: agent A (todo /title and /status only) searches a word that only a
  todo's /notes hold: no hit, no snippet; reading that todo returns no /notes. Agent B (/notes too) finds it.
  A public_client key must see none of the internal types.

Printed: Recall@K over the expected refs, evidence hit rate, field-overreach count (must be 0), pagination
completion rate (must be 100 %), revocations refused, and p50/p95 latency per operation and channel.

Usage: ``.venv/bin/python -m bench.resource_eval [--meetings 60] [--json OUT]``. It starts the embedded stack
(temp dir) or uses the running services when ``MNEMO_DATABASE_URL`` is set (bench/harness.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench.assistant_corpus import Corpus, Meeting, Record, build
from bench.harness import make_key, percentiles, say, services
from memory.resources.pages import PAGE_BYTES, reassemble

KS = (1, 3, 5, 10)
BUSINESS = ("calendar", "contact", "digest", "episode", "intent", "todo", "transcript", "user_profile", "voice_memo")


class Refused(Exception):
    """A read the service refused: its error code."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Figures:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    found_at: dict[str, list[int | None]] = field(default_factory=lambda: defaultdict(list))
    """Per case kind, per expected ref of its search: the ref's 1-based rank, or None when not in the top 10."""
    evidence: list[bool] = field(default_factory=list)
    overreach: int = 0
    pagination: list[bool] = field(default_factory=list)
    largest_page: int = 0
    revocations: list[bool] = field(default_factory=list)


class Channel:
    """list / search / read for one run, timed; a refusal raises :class:`Refused`."""

    name: str

    def __init__(self, figures: Figures) -> None:
        self.figures = figures

    def call(self, operation: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The answer and its size in bytes as sent."""
        raise NotImplementedError

    def timed(self, operation: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        began = time.perf_counter()
        try:
            return self.call(operation, arguments)
        finally:
            self.figures.latencies[f"{self.name} {operation}"].append((time.perf_counter() - began) * 1000)

    def list_all(self, resource: str, filters: dict[str, str]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page, _ = self.timed("list", {"resource": resource, "filters": filters,
                                          **({"cursor": cursor} if cursor else {})})
            items += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return items

    def search(self, query: str, resource: str | None = None, top_k: int = 10) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"query": query, "top_k": top_k, **({"resource": resource} if resource else {})}
        hits: list[dict[str, Any]] = self.timed("search", body)[0]["items"]
        return hits

    def read_page(self, ref: str, cursor: str | None) -> tuple[dict[str, Any], int]:
        return self.timed("read", {"ref": ref, **({"cursor": cursor} if cursor else {})})

    def read(self, ref: str) -> tuple[dict[str, Any], bool]:
        """The whole record, page by page; whether every page kept to the budget."""
        page, sent = self.read_page(ref, None)
        if page["complete"] and page["data"] is not None:
            self.figures.largest_page = max(self.figures.largest_page, sent)
            return page["data"], sent <= PAGE_BYTES
        pages, within = [page], sent <= PAGE_BYTES
        while not page["complete"]:
            page, sent = self.read_page(ref, page["next_cursor"])
            pages.append(page)
            within &= sent <= PAGE_BYTES
            self.figures.largest_page = max(self.figures.largest_page, sent)
        return reassemble(pages), within


class Rest(Channel):
    name = "REST"

    def __init__(self, figures: Figures, url: str, key: str, run_id: str | None) -> None:
        super().__init__(figures)
        headers = {"Authorization": f"Bearer {key}", **({"X-Mnemo-Run": run_id} if run_id else {})}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=60)

    def call(self, operation: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        if operation == "list":
            params = {**arguments["filters"], **({"cursor": arguments["cursor"]} if "cursor" in arguments else {})}
            response = self.http.get(f"/resources/{arguments['resource']}", params=params)
        else:
            response = self.http.post(f"/resources/{operation}", json=arguments)
        if response.status_code >= 400:
            raise Refused(response.json()["error"]["code"])
        answer: dict[str, Any] = response.json()
        return answer, len(response.content)


class Mcp(Channel):
    """The official MCP client on an event loop of its own, so the cases stay plain calls."""

    name = "MCP"

    def __init__(self, figures: Figures, url: str, key: str, run_id: str | None) -> None:
        super().__init__(figures)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ready = threading.Event()
        self.closing: asyncio.Event | None = None
        self.session: ClientSession | None = None
        headers = {"Authorization": f"Bearer {key}", **({"X-Mnemo-Run": run_id} if run_id else {})}
        self.task = asyncio.run_coroutine_threadsafe(self._hold(f"{url}/mcp", headers), self.loop)
        if not self.ready.wait(60):
            raise SystemExit(f"MCP: no session with {url}/mcp within 60 s: {self.task}")

    async def _hold(self, url: str, headers: dict[str, str]) -> None:
        self.closing = asyncio.Event()
        async with (httpx2.AsyncClient(headers=headers, timeout=60) as http,
                    streamable_http_client(url, http_client=http) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            self.session = session
            self.ready.set()
            await self.closing.wait()

    def call(self, operation: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        assert self.session is not None
        result = asyncio.run_coroutine_threadsafe(self.session.call_tool(operation, arguments), self.loop).result()
        answer = result.structured_content or {}
        if result.is_error:
            raise Refused(str(answer.get("error", {}).get("code", "unknown")))
        text = result.content[0]
        return answer, len(text.text.encode("utf-8")) if text.type == "text" else 0

    def close(self) -> None:
        assert self.closing is not None
        self.loop.call_soon_threadsafe(self.closing.set)
        self.task.result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)


class Api:
    """The admin's and the runtime's side: records, policies, runs."""

    def __init__(self, url: str, keys: dict[str, str]) -> None:
        self.url, self.keys = url, keys
        self.http = {name: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
                     for name, key in keys.items()}

    def ok(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 400:
            raise SystemExit(f"{response.request.method} {response.request.url} answered {response.status_code}: "
                             f"{response.text[:400]}")
        answer: dict[str, Any] = response.json()
        return answer

    def put_record(self, record: Record) -> None:
        self.ok(self.http["owner"].put(f"/records/{record.resource}/{record.record_id}", json={"data": record.data}))

    def allow(self, agent: str, resource: str, fields: list[str], operations: tuple[str, ...]) -> None:
        self.ok(self.http["admin"].put(f"/policies/{agent}/{resource}",
                                       json={"operations": list(operations), "fields": fields}))

    def revoke(self, agent: str, resource: str) -> None:
        self.ok(self.http["admin"].delete(f"/policies/{agent}/{resource}"))

    def run(self, agent: str) -> str:
        started = self.ok(self.http["runtime"].post("/runs", json={"thread_id": f"eval-{uuid.uuid4().hex[:8]}",
                                                                    "agent_id": agent}))
        return str(started["run_id"])

    def ceilings(self) -> dict[str, dict[str, Any]]:
        """The owner's own directory: every type's operations and (internal) ceiling of fields."""
        return {entry["type"]: entry for entry in self.ok(self.http["owner"].get("/resources"))["resources"]}


def load(api: Api, corpus: Corpus) -> float:
    """Every record through ``PUT /records`` on 8 threads; records per second."""
    began, done = time.monotonic(), [0]
    lock = threading.Lock()

    def put(record: Record) -> None:
        api.put_record(record)
        with lock:
            done[0] += 1
            if done[0] % 500 == 0:
                say(f"  records written: {done[0]}/{len(corpus.records)}")

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(put, record) for record in corpus.records]:
            future.result()
    return len(corpus.records) / (time.monotonic() - began)


def rank_of(hits: list[dict[str, Any]], ref: str) -> int | None:
    return next((index + 1 for index, hit in enumerate(hits) if hit["ref"] == ref), None)


def conclusion_case(channel: Channel, meeting: Meeting, figures: Figures) -> None:
    hits = channel.search(meeting.topic)
    figures.found_at["conclusion (episode)"].append(rank_of(hits, meeting.episode))
    data, _ = channel.read(meeting.episode)
    figures.evidence.append(meeting.decision in data.get("decisions", []))


def todo_case(channel: Channel, meeting: Meeting, figures: Figures) -> None:
    hits = channel.search(meeting.topic, resource="todo")
    figures.found_at["open todos"] += [rank_of(hits, ref) for ref in meeting.open_todos]
    listed = channel.list_all("todo", {"episode": meeting.episode, "status": "open"})
    statuses = {ref: channel.read(ref)[0].get("status") for ref in (*meeting.open_todos, *meeting.done_todos)}
    figures.evidence.append({item["ref"] for item in listed} == set(meeting.open_todos)
                            and all(statuses[ref] == "open" for ref in meeting.open_todos)
                            and all(statuses[ref] == "done" for ref in meeting.done_todos))


def quote_case(channel: Channel, meeting: Meeting, source: str, figures: Figures) -> None:
    data, within = channel.read(meeting.transcript)
    text = data.get("text", "")
    figures.pagination.append(within and text == source)
    figures.evidence.append(text[meeting.quote_offset:meeting.quote_offset + len(meeting.quote)] == meeting.quote)


def revocation_case(api: Api, make: Callable[[str], Channel], meeting: Meeting, fields: list[str],
                    figures: Figures) -> None:
    agent = "assistant-r"
    api.allow(agent, "transcript", fields, ("list", "search", "read"))
    channel = make(api.run(agent))
    try:
        first, _ = channel.read_page(meeting.transcript, None)
        api.revoke(agent, "transcript")
        try:
            channel.read_page(meeting.transcript, first["next_cursor"])
            figures.revocations.append(False)
        except Refused:
            figures.revocations.append(True)
    finally:
        if isinstance(channel, Mcp):
            channel.close()


def forbidden_field_case(agent_a: Channel, agent_b: Channel, meeting: Meeting, figures: Figures) -> None:
    hits = agent_a.search(meeting.secret_word)
    figures.overreach += sum(1 for hit in hits if meeting.secret_word in hit["snippet"] or hit["ref"] ==
                             meeting.secret_todo)
    data, _ = agent_a.read(meeting.secret_todo)
    figures.overreach += len(set(data) - {"title", "status"})
    figures.found_at["keyword in /notes, agent B"].append(rank_of(agent_b.search(meeting.secret_word),
                                                                  meeting.secret_todo))


def public_case(public: Channel, meeting: Meeting, figures: Figures) -> None:
    internal = {"transcript", "digest", "intent", "user_profile", "memory", "session", "session_summary", "task"}
    figures.overreach += sum(1 for hit in public.search(meeting.topic) if hit["resource"] in internal)
    try:
        public.read(meeting.transcript)
        figures.overreach += 1
    except Refused:
        pass


@contextmanager
def channels(kind: str, url: str, keys: dict[str, str], runs: dict[str, str],
             figures: Figures) -> Iterator[dict[str, Channel]]:
    make: Callable[[str, str | None], Channel] = (
        (lambda key, run: Rest(figures, url, key, run)) if kind == "REST" else
        (lambda key, run: Mcp(figures, url, key, run)))
    opened = {"b": make(keys["runtime"], runs["assistant"]), "a": make(keys["runtime"], runs["agent-a"]),
              "public": make(keys["public"], None)}
    try:
        yield opened
    finally:
        for channel in opened.values():
            if isinstance(channel, Mcp):
                channel.close()


def evaluate(kind: str, api: Api, corpus: Corpus, runs: dict[str, str], transcript_fields: list[str]) -> Figures:
    figures = Figures()
    texts = {record.ref: record.data["text"] for record in corpus.records if record.resource == "transcript"}
    with channels(kind, api.url, api.keys, runs, figures) as opened:
        for index, meeting in enumerate(corpus.meetings):
            conclusion_case(opened["b"], meeting, figures)
            todo_case(opened["b"], meeting, figures)
            quote_case(opened["b"], meeting, texts[meeting.transcript], figures)
            forbidden_field_case(opened["a"], opened["b"], meeting, figures)
            public_case(opened["public"], meeting, figures)
            if index % 6 == 0:
                revocation_case(api, lambda run: (Rest(figures, api.url, api.keys["runtime"], run) if kind == "REST"
                                                  else Mcp(figures, api.url, api.keys["runtime"], run)),
                                meeting, transcript_fields, figures)
            if (index + 1) % 20 == 0:
                say(f"  {kind}: {index + 1}/{len(corpus.meetings)} meetings")
    return figures


def recall_at(ranks: list[int | None]) -> dict[int, float]:
    return {k: sum(1 for rank in ranks if rank is not None and rank <= k) / len(ranks) for k in KS}


def report(kind: str, figures: Figures) -> dict[str, Any]:
    every = [rank for ranks in figures.found_at.values() for rank in ranks]
    out: dict[str, Any] = {
        "recall_at": recall_at(every),
        "recall_at_by_case": {case: recall_at(ranks) for case, ranks in figures.found_at.items()},
        "expected_refs": len(every),
        "evidence_hit_rate": sum(figures.evidence) / len(figures.evidence),
        "field_overreach": figures.overreach,
        "pagination_completion": sum(figures.pagination) / len(figures.pagination),
        "largest_page_bytes": figures.largest_page,
        "revocations_refused": f"{sum(figures.revocations)}/{len(figures.revocations)}",
        "latency_ms": {name: percentiles(values) for name, values in sorted(figures.latencies.items())},
    }

    def line(recall: dict[int, float]) -> str:
        return " ".join(f"R@{k} {value * 100:5.1f}" for k, value in recall.items())

    say(f"{kind}: {line(out['recall_at'])} (over {len(every)} expected refs); evidence hit rate "
        f"{out['evidence_hit_rate'] * 100:.1f} %; field overreach {figures.overreach}; pagination completed "
        f"{out['pagination_completion'] * 100:.1f} % (largest page {figures.largest_page} B); revocations refused "
        f"{out['revocations_refused']}")
    for case, recall in out["recall_at_by_case"].items():
        say(f"  {case:28s} {line(recall)}")
    for name, stats in out["latency_ms"].items():
        say(f"  {name:12s} p50 {stats['p50']:7.1f} ms  p95 {stats['p95']:7.1f} ms  (n={stats['n']})")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meetings", type=int, default=60, help="meetings in the corpus (≥ 2,000 records at 60)")
    parser.add_argument("--channels", default="REST,MCP", help="which of REST and MCP to evaluate")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    kinds = [kind.strip() for kind in args.channels.split(",") if kind.strip()]
    if not kinds or set(kinds) - {"REST", "MCP"}:
        raise SystemExit("--channels: a comma-separated list of REST and MCP")
    corpus = build(args.meetings)
    say(f"resource eval: {len(corpus.records)} records, {len(corpus.meetings)} meetings")
    with services("mnemo-resource-eval-") as svc:
        tenant = f"reval-{uuid.uuid4().hex[:8]}"
        keys = {name: make_key(svc.sqlalchemy_url, tenant, user, roles) for name, user, roles in (
            ("owner", "owner", ["memory_writer"]), ("runtime", "owner", ["agent_runtime"]),
            ("admin", "root", ["admin"]), ("public", "owner", ["public_client"]))}
        api = Api(svc.api_url, keys)
        rate = load(api, corpus)
        say(f"records written: {len(corpus.records)} at {rate:.0f}/s")
        ceilings = api.ceilings()
        for resource in BUSINESS:
            api.allow("assistant", resource, ceilings[resource]["fields"], tuple(ceilings[resource]["operations"]))
        api.allow("agent-a", "todo", ["/title", "/status"], ("list", "search", "read"))
        runs = {agent: api.run(agent) for agent in ("assistant", "agent-a")}
        results: dict[str, Any] = {"records": len(corpus.records), "records_per_second": rate}
        for kind in kinds:
            results[kind] = report(kind, evaluate(kind, api, corpus, runs, ceilings["transcript"]["fields"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
