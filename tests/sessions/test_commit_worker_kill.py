"""A ``mnemo worker`` process killed while its commit waits on the model: a new worker finishes the commit
and no memory exists twice. The model is the labelled LLM stand-in (tests/sessions/llm_standin.py); the
worker, Temporal, PostgreSQL and the API are real.

The test runs on a database of its own. A worker ensures the session sweep's Schedule, which then
starts every commit the tests before this one left accepted: on the shared database, such a commit reached
this test's model first and took its scripted answer.

Timing: the extract activity heartbeats every 5 s with a 30 s heartbeat timeout, so Temporal retries the
killed attempt within about 30 s of the kill; the test allows 75 s for the commit to end."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from api.devstack.postgres import PostgresInfo
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.models import Memory
from tests.conftest import auth
from tests.factories import key_in, scratch_stack
from tests.sessions.conftest import TERMINAL, post, say
from tests.sessions.llm_standin import LlmStandIn, answer, running_standin
from tests.workers import worker_env

MNEMO = str(Path(sys.executable).parent / "mnemo")
MODEL = "llama3.1-8b-instruct"
SLOW_ANSWER_SECONDS = 8.0
"""The first answer's delay: long enough that the worker is surely killed while it waits for it."""


@pytest.fixture
def standin() -> Iterator[LlmStandIn]:
    with running_standin() as running:
        yield running


@pytest.fixture
def own_stack(settings: Settings, postgres: PostgresInfo) -> Iterator[tuple[Settings, Engine]]:
    """A database and a task queue no other test uses, so the test decides which worker runs which commit."""
    with scratch_stack(settings, postgres, "mnemo_kill") as stack:
        yield stack


def _worker(settings: Settings, standin: LlmStandIn, log: Path) -> subprocess.Popen[bytes]:
    env = worker_env(  # MNEMO_TASK_QUEUE: the settings' own queue
        settings, MNEMO_EXTRACTOR="llm", MNEMO_LLM_BASE_URL=standin.base_url, MNEMO_LLM_MODEL=MODEL,
        MNEMO_DATA_DIR=str(settings.data_dir),
    )
    return subprocess.Popen([MNEMO, "worker"], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _item(event_id: str, category: str, key: str, value: str, content: str) -> dict[str, Any]:
    return {"category": category, "abstract": f"{key} = {value}", "overview": f"{category} {key} = {value}",
            "content": content, "key": key, "source_level": "E2", "evidence_event_ids": [event_id],
            "correction": False}


def _memory_rows(engine: Engine, tenant: str) -> int:
    with tenant_session(engine, tenant) as session:
        return session.execute(select(func.count()).select_from(Memory)).scalar_one()


def _read(api: TestClient, key: str, session_id: str, commit_id: str) -> dict[str, Any]:
    body: dict[str, Any] = api.get(f"/sessions/{session_id}/commits/{commit_id}", headers=auth(key)).json()
    return body


def _wait(what: str, done: Any, timeout: float, *alive: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        assert all(p.poll() is None for p in alive), f"{what}: a worker exited early"
        time.sleep(0.05)


def test_a_worker_killed_mid_extraction_is_replaced_and_the_commit_stores_each_memory_once(
    own_stack: tuple[Settings, Engine], standin: LlmStandIn, tmp_path: Path
) -> None:
    own_settings, engine = own_stack
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = key_in(engine, tenant)
    first = _worker(own_settings, standin, tmp_path / "first.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        with TestClient(create_app(own_settings)) as api:
            events = post(
                api, key, "s-kill",
                say("k1", "user", "我住在上海。"),
                say("k2", "user", "I work at Contoso as a data engineer."),
            )
            candidates = (
                _item(events[0], "PROFILE", "profile.city", "上海", "我住在上海。"),
                _item(events[1], "PROFILE", "profile.employer", "Contoso", "I work at Contoso as a data engineer."),
            )
            standin.script(replace(answer(*candidates), delay_seconds=SLOW_ANSWER_SECONDS), answer(*candidates))

            accepted = api.post("/sessions/s-kill/commit", json={"commit_id": "c-kill"}, headers=auth(key))
            assert accepted.status_code == 202, accepted.text
            _wait("the first worker asks the model", lambda: len(standin.received) == 1, 60, first)
            assert _read(api, key, "s-kill", "c-kill")["status"] == "archived"  # mid-commit: extracting
            first.send_signal(signal.SIGKILL)
            assert first.wait(10) == -signal.SIGKILL

            second = _worker(own_settings, standin, tmp_path / "second.log")
            _wait("the commit ends", lambda: _read(api, key, "s-kill", "c-kill")["status"] in TERMINAL, 75, second)
            done = _read(api, key, "s-kill", "c-kill")

            assert done["status"] == "completed", done
            assert len(standin.received) == 2 and standin.received[0].body == standin.received[1].body
            created = done["memories"]["created"]
            assert sorted(m["key"] for m in created) == ["profile.city", "profile.employer"]
            assert len({m["memory_id"] for m in created}) == len(candidates)
            assert _memory_rows(engine, tenant) == len(candidates)  # exactly one memory per candidate

            again = api.post("/sessions/s-kill/commit", json={"commit_id": "c-kill"}, headers=auth(key))
            assert again.status_code == 202 and again.json()["replayed"] is True
            time.sleep(1.0)  # a replay that (wrongly) ran the workflow again would have had time to write
            assert _read(api, key, "s-kill", "c-kill") == done
            assert _memory_rows(engine, tenant) == len(candidates)
            assert len(standin.received) == 2  # the replay did not ask the model again
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)
