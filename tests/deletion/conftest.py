"""A real Temporal worker (in a thread of its own) and an API configured for quick deletion retries."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from activities.deletion import FaultPlan
from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from api.worker import build_worker
from tests.conftest import auth


@pytest.fixture(scope="session")
def deletion_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "task_queue": f"deletion-test-{uuid.uuid4().hex[:8]}",
            "deletion_retry_wait_seconds": 0.5,
            "deletion_heartbeat_timeout_seconds": 3.0,
        }
    )


@pytest.fixture(scope="session")
def faults() -> FaultPlan:
    return FaultPlan()


@pytest.fixture(scope="session")
def deletion_worker(deletion_settings: Settings, engine: Engine, faults: FaultPlan) -> Iterator[None]:
    """Runs on its own event loop so that synchronous tests can wait while it works."""
    started, stop = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    async def main() -> None:
        client = await connect(deletion_settings)
        with ThreadPoolExecutor(max_workers=8) as executor:
            async with build_worker(
                client, engine, deletion_settings.task_queue, executor, deletion_batch_size=7, faults=faults
            ):
                started.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported by the fixture
            errors.append(exc)
            started.set()

    thread = threading.Thread(target=run, name="deletion-worker", daemon=True)
    thread.start()
    started.wait(30)
    assert not errors, errors
    yield
    stop.set()
    thread.join(30)


@pytest.fixture(scope="session")
def api(deletion_settings: Settings, deletion_worker: None) -> Iterator[TestClient]:
    with TestClient(create_app(deletion_settings)) as client:
        yield client


def wait_for(
    api: TestClient, key: str, job_id: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30
) -> dict[str, Any]:
    """Poll the job (bounded) until ``predicate`` holds; fail with its last state otherwise."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = api.get(f"/memory-deletions/{job_id}", headers=auth(key))
        assert response.status_code == 200, response.text
        body = response.json()
        if predicate(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"deletion job {job_id} never reached the expected state; last: {body}")


def completed(body: dict[str, Any]) -> bool:
    return body["status"] == "completed"
