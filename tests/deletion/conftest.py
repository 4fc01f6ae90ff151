"""A real Temporal worker (in a thread of its own) and an API configured for quick deletion retries."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from activities.deletion import FaultPlan
from api.main import create_app
from api.settings import Settings
from tests.conftest import poll
from tests.workers import ThreadWorker


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
    """Small purge batches, so a deletion takes several checkpoints; faults injected on demand."""
    worker = ThreadWorker(
        deletion_settings, engine, deletion_settings.task_queue, deletion_batch_size=7, faults=faults,
        artifacts=deletion_settings.artifact_root(engine),
    ).start()
    yield
    worker.stop()


@pytest.fixture(scope="session")
def api(deletion_settings: Settings, deletion_worker: None) -> Iterator[TestClient]:
    with TestClient(create_app(deletion_settings)) as client:
        yield client


def wait_for(
    api: TestClient, key: str, job_id: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30
) -> dict[str, Any]:
    """Poll the deletion job until ``predicate`` holds."""
    return poll(api, key, f"/memory-deletions/{job_id}", predicate, timeout)


def completed(body: dict[str, Any]) -> bool:
    return bool(body["status"] == "completed")
