"""``mnemo import FILE.jsonl``: memories, events and whole conversations, one JSON object a line, sent in batches.

A line is ``{"type": "memory", …}`` (the rest is a ``POST /memory-candidates`` body), ``{"type": "event", …}`` (a
``POST /memory-events`` body) or ``{"type": "conversation", "session_id": …, "messages": […]}`` (a session's
messages, as ``POST /sessions/{id}/messages`` takes them). Memories and events go through the batch routes, up
to :data:`MAX_BATCH_ITEMS` a request. A line without an idempotency key gets one derived from its text, so
sending it again replays it and never stores it twice; a journal next to the file (``FILE.jsonl.import-state``)
records how far the import got, and a re-run after an interruption skips the lines before that point. A bad line
is reported with its number and reason and the others go on; the exit status is 0 only if every line landed.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.http import Connection, refusal
from api.cli.options import Client, api_client
from memory.store.batches import MAX_BATCH_ITEMS

ROUTES = {"memory": "/memory-candidates:batch", "event": "/memory-events:batch"}
MAX_REQUEST_BYTES = 900_000
"""A batch request's body stays under the API's 1 MiB limit (``api.request_guard.MAX_BODY_BYTES``)."""
PROGRESS_EVERY_SECONDS = 5.0
"""Without a terminal, a progress line this often (a terminal's line is redrawn after every batch)."""
BUSY_RETRIES = 20
"""A batch refused with a 429 (the tenant's write slots are taken) is sent again after its Retry-After."""


@dataclass(frozen=True)
class Line:
    number: int
    kind: str
    body: dict[str, Any]


@dataclass
class Tally:
    """What became of the lines: committed, replayed, skipped (an earlier run committed them), failed."""

    total: int
    committed: int = 0
    replayed: int = 0
    skipped: int = 0
    failed: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    shown: float = 0.0

    @property
    def done(self) -> int:
        return self.committed + self.replayed + self.skipped + len(self.failed)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = (self.done - self.skipped) / elapsed
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        return (f"{self.done}/{self.total} lines ({self.committed} committed, {self.replayed} replayed, "
                f"{self.skipped} skipped, {len(self.failed)} failed), {rate:.0f} lines/s, ETA {left:.0f}s")

    def show(self, *, last: bool = False) -> None:
        """Progress on stderr: one line redrawn in place on a terminal, else a line every few seconds."""
        if sys.stderr.isatty():
            typer.echo(f"\r\033[K{self.line()}", err=True, nl=last)
        elif last or time.monotonic() - self.shown >= PROGRESS_EVERY_SECONDS:
            typer.echo(self.line(), err=True)
            self.shown = time.monotonic()


def derived_key(raw: str, part: str = "") -> str:
    """An idempotency key from a line's own text: the same line sent again is a replay, never a second copy."""
    return "import-" + hashlib.sha256(f"{raw.strip()}\n{part}".encode()).hexdigest()[:40]


def parse_line(number: int, raw: str) -> Line:
    """A line as the request it becomes, its idempotency keys filled in; ValueError says why it cannot be one."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("a line is a JSON object with a type")
    kind = data.pop("type", None)
    if kind in ROUTES:
        data.setdefault("idempotency_key", derived_key(raw))
    elif kind == "conversation":
        messages = data.get("messages")
        if not isinstance(data.get("session_id"), str) or not isinstance(messages, list) or not messages:
            raise ValueError('a conversation needs a "session_id" and a non-empty list of "messages"')
        for index, message in enumerate(messages):
            if isinstance(message, dict):
                message.setdefault("idempotency_key", derived_key(raw, str(index)))
    else:
        raise ValueError(f'"type" must be memory, event or conversation, not {kind!r}')
    return Line(number, kind, data)


class Journal:
    """How far an import of one file into one API and key got: every line before ``through`` was sent and
    answered. It is kept only while the file's first lines are the ones it was written for."""

    def __init__(self, path: Path, identity: str) -> None:
        self.path, self.identity = path, identity
        saved: dict[str, Any] = {}
        if path.is_file():
            try:
                saved = json.loads(path.read_text())
            except ValueError:
                saved = {}
        fits = saved.get("identity") == identity
        self.through: int = int(saved.get("through", 0)) if fits else 0
        self.digest: str = str(saved.get("digest", "")) if fits else ""
        self.failed: dict[str, str] = dict(saved.get("failed", {})) if fits else {}

    def save(self, through: int, digest: str) -> None:
        self.through, self.digest = through, digest
        state = {"identity": self.identity, "through": through, "digest": digest, "failed": self.failed}
        self.path.write_text(json.dumps(state))


class Importer:
    """Sends the lines in order, consecutive memories or events in batches, and tallies what became of them."""

    def __init__(self, conn: Connection, tally: Tally, journal: Journal, batch: int) -> None:
        self.conn, self.tally, self.journal, self.batch = conn, tally, journal, batch
        self.pending: list[Line] = []
        self.size = 0

    def fail(self, number: int, reason: str) -> None:
        typer.echo(f"\r\033[Kmnemo: line {number}: {reason}" if sys.stderr.isatty() else
                   f"mnemo: line {number}: {reason}", err=True)
        self.tally.failed.append(number)
        self.journal.failed[str(number)] = reason

    def add(self, line: Line) -> None:
        if line.kind == "conversation":
            self.flush()
            self.conversation(line)
            return
        size = len(json.dumps(line.body, ensure_ascii=False).encode())
        if self.pending and (self.pending[0].kind != line.kind or len(self.pending) >= self.batch
                             or self.size + size > MAX_REQUEST_BYTES):
            self.flush()
        self.pending.append(line)
        self.size += size

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """The answer of a request, sent again while the tenant is busy (429); None, with the reason, if refused."""
        for _ in range(BUSY_RETRIES):
            response = self.conn.request("POST", path, json=body)
            if response.status_code != 429:
                break
            time.sleep(float(response.headers.get("Retry-After", "1")))
        if response.status_code >= 400:
            return refusal(response)
        return response.json()

    def flush(self) -> None:
        if not self.pending:
            return
        lines, self.pending, self.size = self.pending, [], 0
        answer = self.post(ROUTES[lines[0].kind], {"items": [line.body for line in lines]})
        if isinstance(answer, str):  # the whole request was refused: every line of it
            for line in lines:
                self.fail(line.number, answer)
            return
        for line, result in zip(lines, answer["results"], strict=True):
            if result["outcome"] == "error":
                self.fail(line.number, f"{result['error']['code']}: {result['error']['message']}")
            elif result["outcome"] == "replayed":
                self.tally.replayed += 1
            else:
                self.tally.committed += 1

    def conversation(self, line: Line) -> None:
        """A session's messages: the session opened unless it exists, the messages posted in batches."""
        session_id = line.body["session_id"]
        if self.conn.request("GET", f"/sessions/{session_id}").status_code == 404:
            opened = self.post("/sessions", {k: v for k, v in line.body.items() if k != "messages"})
            if isinstance(opened, str):
                self.fail(line.number, opened)
                return
        messages = line.body["messages"]
        replayed = True
        for start in range(0, len(messages), MAX_BATCH_ITEMS):
            chunk = messages[start:start + MAX_BATCH_ITEMS]
            answer = self.post(f"/sessions/{session_id}/messages", {"messages": chunk})
            if isinstance(answer, str):
                self.fail(line.number, answer)
                return
            replayed = replayed and all(event["replayed"] for event in answer["events"])
        if replayed:
            self.tally.replayed += 1
        else:
            self.tally.committed += 1


def import_file(
    file: Annotated[Path, typer.Argument(help="JSON Lines: one memory, event or conversation a line.")],
    batch: Annotated[int, typer.Option("--batch", min=1, max=MAX_BATCH_ITEMS,
                                       help="Memories or events per request.")] = MAX_BATCH_ITEMS,
    *,
    client: Client,
) -> None:
    """Import memories, events and conversations from a JSON Lines file, in batches; resumable (a re-run skips
    what an interrupted one committed, and replays rather than duplicates the rest)."""
    try:
        raw_lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"mnemo: cannot read {file}: {exc}", err=True)
        raise typer.Exit(1) from exc
    identity = hashlib.sha256(f"{client.conn.api_url}\n{client.conn.key}".encode()).hexdigest()[:16]
    journal = Journal(file.with_name(file.name + ".import-state"), identity)
    numbered = [(number, raw) for number, raw in enumerate(raw_lines, 1) if raw.strip()]
    digests, running = [hashlib.sha256().hexdigest()], hashlib.sha256()
    for _, raw in numbered:  # digests[k]: of the first k lines, which the journal's point is checked against
        running.update(raw.encode() + b"\n")
        digests.append(running.hexdigest())
    if journal.through and (journal.through > len(numbered) or digests[journal.through] != journal.digest):
        typer.echo("mnemo: the file changed since the last import: every line is sent again", err=True)
        journal.through, journal.failed = 0, {}
    tally = Tally(total=len(numbered))
    importer = Importer(client.conn, tally, journal, batch)
    for position, (number, raw) in enumerate(numbered):
        if position < journal.through and str(number) not in journal.failed:  # an earlier run committed it
            tally.skipped += 1
            continue
        journal.failed.pop(str(number), None)  # a line an earlier run failed is sent again: its key makes it safe
        try:
            importer.add(parse_line(number, raw))
        except ValueError as exc:
            importer.fail(number, f"not a line to import: {exc}")
        answered = position + 1 - len(importer.pending)  # the lines before the first still unsent
        if answered > journal.through:
            journal.save(answered, digests[answered])
        tally.show()
    importer.flush()
    journal.save(len(numbered), digests[-1])
    tally.show(last=True)
    summary = {"file": str(file), "lines": tally.total, "committed": tally.committed, "replayed": tally.replayed,
               "skipped": tally.skipped, "failed": len(tally.failed), "failed_lines": tally.failed}
    client.answer(summary, lambda s: (
        f"imported {s['file']}: {s['lines']} lines, {s['committed']} committed, {s['replayed']} replayed, "
        f"{s['skipped']} skipped (committed by an earlier run), {s['failed']} failed"))
    if tally.failed:
        raise typer.Exit(1)


import_command = api_client(import_file)
