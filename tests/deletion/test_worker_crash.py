"""Kill the worker process in the middle of a purge: a new worker resumes from the checkpoint."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate
from tests.workers import worker_env

MNEMO = str(Path(sys.executable).parent / "mnemo")


@pytest.fixture
def crash_settings(deletion_settings: Settings) -> Settings:
    return deletion_settings.model_copy(update={"task_queue": f"crash-{uuid.uuid4().hex[:8]}"})


def _worker(settings: Settings, log: Path, faults: str = "") -> subprocess.Popen[bytes]:
    env = worker_env(settings, MNEMO_DELETION_BATCH_SIZE="5", MNEMO_DELETION_FAULTS=faults)
    return subprocess.Popen([MNEMO, "worker"], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


@pytest.fixture
def api(crash_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(crash_settings)) as client:
        yield client


def test_a_killed_worker_mid_purge_is_resumed_by_a_new_one(
    api: TestClient, crash_settings: Settings, make_key: MakeKey, tmp_path: Path
) -> None:
    key = make_key(user="erin")
    for n in range(12):
        api.post("/memory-candidates", json=candidate(f"埃林的记录 {n}"), headers=auth(key))
    first = _worker(crash_settings, tmp_path / "first.log", faults="hang-after-first-batch:primary_memories")
    second: subprocess.Popen[bytes] | None = None
    try:
        job = api.post(
            "/deletion-requests", json={"deletion_request_id": "erin", "scope": {"type": "subject"}}, headers=auth(key)
        ).json()["job_id"]
        mid = wait_for(
            api,
            key,
            job,
            lambda b: any(layer["layer"] == "primary_memories" and layer["removed"] == 5 for layer in b["layers"]),
        )
        assert mid["status"] == "running"
        first.send_signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
        second = _worker(crash_settings, tmp_path / "second.log")
        body = wait_for(api, key, job, completed, timeout=60)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
    layers = {layer["layer"]: layer for layer in body["layers"]}
    assert layers["primary_memories"]["removed"] == 12  # 5 before the kill + 7 after: nothing twice
    assert layers["search_projection"]["removed"] == 12
    assert body["fully_deleted"] is True
    assert api.post("/memory-query", json={"query": "埃林的记录"}, headers=auth(key)).json()["items"] == []
