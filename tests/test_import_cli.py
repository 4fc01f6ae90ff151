"""``mnemo import FILE.jsonl`` as a real subprocess against a real API: killed midway, run again, every line is
stored exactly once; a bad line is reported by number and does not stop the others."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from api.cli.app import app
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from tests.conftest import MakeKey
from tests.factories import candidate, event
from tests.workers import served

MNEMO = str(Path(sys.executable).parent / "mnemo")
BAD_LINE = 95


@pytest.fixture(scope="module")
def api_url(settings: Settings) -> Iterator[str]:
    with served(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}"


def _history() -> list[str]:
    """Blocks of ten events and ten memories (no idempotency keys: the import derives them), a conversation in
    the middle, and one memory with a field the API does not know on line 95."""
    lines: list[str] = []
    for block in range(10):
        for n in range(10):
            body = event("", payload={"role": "user", "text": f"message {block}-{n}"}, session_id="feed")
            lines.append(json.dumps({"type": "event", **{k: v for k, v in body.items() if k != "idempotency_key"}}))
        for n in range(10):
            memory = candidate(f"imported fact {block}-{n}", source={
                "source_id": f"line-{block}-{n}", "source_type": "IMPORT", "captured_at": "2026-06-01T09:00:00Z"})
            lines.append(json.dumps({"type": "memory", **memory}))
        if block == 5:
            said = [{"role": "user", "content": f"turn {n}", "created_at": "2026-06-02T08:00:00Z"} for n in range(3)]
            lines.append(json.dumps({"type": "conversation", "session_id": "imported-chat", "messages": said}))
    lines[BAD_LINE - 1] = json.dumps({**json.loads(lines[BAD_LINE - 1]), "colour": "red"})
    return lines


def _stored(engine: Engine, tenant: str) -> tuple[int, int, int, int]:
    with tenant_session(engine, tenant) as session:
        def one(sql: str) -> int:
            return int(session.execute(text(sql)).scalar_one())
        return (one("SELECT count(*) FROM memory_events WHERE session_id = 'feed'"),
                one("SELECT count(DISTINCT payload) FROM memory_events WHERE session_id = 'feed'"),
                one("SELECT count(*) FROM memories WHERE source_type = 'IMPORT'"),
                one("SELECT count(*) FROM memory_events WHERE session_id = 'imported-chat'"))


def test_an_import_killed_midway_resumes_and_stores_every_line_once(
    api_url: str, make_key: MakeKey, engine: Engine, tmp_path: Path
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}, "MNEMO_API_URL": api_url,
           "MNEMO_API_KEY": make_key(tenant=tenant)}
    file = tmp_path / "history.jsonl"
    file.write_text("\n".join(_history()) + "\n")
    state = tmp_path / "history.jsonl.import-state"
    command = [MNEMO, "import", str(file), "--batch", "20"]

    first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (state.is_file() and json.loads(state.read_text() or "{}").get("through", 0) >= 60):
        assert first.poll() is None and time.monotonic() < deadline, "the import ended before it could be killed"
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    assert first.wait(10) == -signal.SIGKILL
    events, _, memories, _ = _stored(engine, tenant)
    assert 0 < events + memories < 199  # interrupted midway

    # The re-runs in this process (the same command, without a second interpreter's start-up).
    again = CliRunner().invoke(app, command[1:], env=env)
    assert again.exit_code == 1, again.stderr  # not everything landed: the bad line
    assert f"line {BAD_LINE}: unknown_field: colour: unknown field" in again.stderr
    skipped = int(again.stdout.split(" replayed, ")[1].split(" skipped")[0])
    assert skipped >= 60 and "1 failed" in again.stdout, again.stdout
    assert _stored(engine, tenant) == (100, 100, 99, 3)

    state.unlink()  # no journal: every line is sent again and replayed, never stored twice
    fresh = CliRunner().invoke(app, [*command[1:], "--json"], env=env)
    summary = json.loads(fresh.stdout)
    assert (fresh.exit_code, summary["replayed"], summary["committed"], summary["failed_lines"]) == (
        1, 200, 0, [BAD_LINE])
    assert _stored(engine, tenant) == (100, 100, 99, 3)
