"""Fixtures of the task tests: a real worker (in a thread, so sync tests can use it) and seeded tenants."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from activities.stores import default_destinations
from api.settings import Settings
from memory.db import tenant_session
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth, poll
from tests.workers import ThreadWorker

SMALL_DATASET = 2_400
"""About 200 lines a month: every step runs for real, in well under a second."""


@pytest.fixture(scope="session")
def task_worker(settings: Settings, engine: Engine) -> Iterator[ThreadWorker]:
    """The worker behind the API's task queue, with the fault-injecting destinations registered too."""
    worker = ThreadWorker(
        settings,
        engine,
        settings.task_queue,
        data_dir=settings.data_dir,
        destinations=default_destinations(settings.data_dir, "timeout-after-store,lost-request,unreachable"),
    ).start()
    yield worker
    worker.stop()


@dataclass(frozen=True)
class Team:
    tenant: str
    owner: str
    approver: str
    operator: str
    other_user: str


@pytest.fixture()
def team(make_key: MakeKey, engine: Engine) -> Team:
    """A fresh tenant with the small sales dataset and keys for an owner, an approver and an operator."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    owner = make_key(tenant=tenant, user="alice", roles=("memory_writer",))
    with tenant_session(engine, tenant) as session:
        seed_sales(session, tenant, total=SMALL_DATASET)
    return Team(
        tenant=tenant,
        owner=owner,
        approver=make_key(tenant=tenant, user="bob", roles=("approver",)),
        operator=make_key(tenant=tenant, user="olga", roles=("operator",)),
        other_user=make_key(tenant=tenant, user="carol", roles=("memory_writer",)),
    )


def start_task(client: TestClient, key: str, intent: str | None = None, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task_type": "monthly-report",
        "request_intent_id": intent or f"intent-{uuid.uuid4().hex[:8]}",
        "goal": {"month": "2026-06", "currency": "CNY"},
    }
    body.update(overrides)
    response = client.post("/tasks", json=body, headers=auth(key))
    assert response.status_code == 201, response.text
    return dict(response.json())


def wait_for(
    client: TestClient, key: str, task_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    """Poll the task until ``done`` holds."""
    return poll(client, key, f"/tasks/{task_id}", done, timeout)


def status_is(*statuses: str) -> Callable[[dict[str, Any]], bool]:
    return lambda view: view["status"] in statuses


def approve(client: TestClient, key: str, view: dict[str, Any], **overrides: Any) -> Any:
    body = {
        "decision": "approve",
        "artifact_sha256": view["pending_approval"]["artifact_sha256"],
        "state_version": view["state_version"],
    }
    body.update(overrides)
    return client.post(f"/tasks/{view['task_id']}/approvals", json=body, headers=auth(key))


def publications(data_dir: Path, destination: str = "reports") -> list[Path]:
    published = data_dir / "publications" / destination / "published"
    return sorted(published.iterdir()) if published.exists() else []
