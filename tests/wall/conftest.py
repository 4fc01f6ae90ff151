"""The wall's stack: a scratch database of its own (a restore swaps the whole database, which no other test
may feel), a real worker on its own task queue and data dir, and the real app over TestClient."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from api.devstack.postgres import PostgresInfo
from api.main import create_app
from api.settings import Settings
from tests.factories import scratch_database
from tests.wall.stats import STATS
from tests.workers import ThreadWorker


@dataclass(frozen=True)
class WallStack:
    settings: Settings
    engine: Engine
    api: TestClient
    conninfo: str  # the superuser's: the residue scan reads every row, under no row-level security
    data_dir: Path
    archives: Path


@pytest.fixture(scope="module")
def wall_stack(
    settings: Settings, postgres: PostgresInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WallStack]:
    from memory.db import make_engine

    with scratch_database(postgres, "mnemo_wall") as url:
        own = settings.model_copy(update={
            "database_url": url,
            "task_queue": f"wall-{uuid.uuid4().hex[:8]}",
            "data_dir": tmp_path_factory.mktemp("wall-data"),
            "deletion_retry_wait_seconds": 0.5,
            "deletion_heartbeat_timeout_seconds": 5.0,
            # Commits start when a rule says so, never by themselves: the model knows what each one covers.
            "session_commit_after_messages": 0,
            "session_commit_after_tokens": 0,
            "session_commit_idle_seconds": 0,
        })
        engine = make_engine(url)
        worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine)).start()
        try:
            with TestClient(create_app(own)) as api:
                database = make_url(url).database
                assert database
                yield WallStack(own, engine, api, postgres.conninfo(database), own.data_dir,
                                tmp_path_factory.mktemp("wall-archives"))
        finally:
            worker.stop()
            engine.dispose()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How much the wall ran: the note of issue 23 states it."""
    if STATS.sequences:
        terminalreporter.write_line(STATS.line())
