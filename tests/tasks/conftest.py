"""Fixtures of the task tests: a real worker (in a thread, so sync tests can use it) and seeded tenants."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from temporalio.client import Client

from activities.stores import Published, StoredDestination, default_destinations
from activities.tasks.faults import FaultPlan
from api.settings import Settings
from api.worker import build_worker
from memory.db import tenant_session
from memory.llm import LlmConfig
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth, poll
from tests.workers import ThreadWorker
from workflows.report_task import ReportTaskInput

SMALL_DATASET = 2_400
"""About 200 lines a month: every step runs for real, in well under a second."""


@pytest.fixture(scope="session")
def task_worker(settings: Settings, engine: Engine) -> Iterator[ThreadWorker]:
    """The worker behind the API's task queue, with the fault-injecting destinations registered too."""
    worker = ThreadWorker(
        settings,
        engine,
        settings.task_queue,
        artifacts=settings.artifact_root(engine),
        destinations=default_destinations(engine, settings.artifact_root(engine),
                                          "timeout-after-store,lost-request,unreachable"),
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


def small_tenant(make_key: MakeKey, engine: Engine) -> str:
    """A fresh tenant with a key and 600 sales lines: enough for one month's steps, for a worker of the test's own."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    with tenant_session(engine, tenant) as session:
        seed_sales(session, tenant, total=600)
    return tenant


def report_input(tenant: str, task_id: str, intent: str, **options: Any) -> ReportTaskInput:
    """The workflow input of alice's June report (``options``: the workflow's tunables, e.g. its timeouts)."""
    goal = {"month": "2026-06", "currency": "CNY"}
    return ReportTaskInput(tenant, task_id, "alice", "monthly-report", goal, intent, **options)


@asynccontextmanager
async def own_worker(
    settings: Settings, engine: Engine, *, threads: int, faults: FaultPlan, activity_slots: int | None = None,
    llm: LlmConfig | None = None,
) -> AsyncIterator[tuple[Client, str]]:
    """A worker with ``faults`` on a task queue no other worker polls, so the test decides what runs: client, queue.
    ``llm``: the endpoint its ``llm`` steps ask (the API's must be the one its definitions were accepted with)."""
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    queue = f"own-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(max_workers=threads) as executor:
        worker = build_worker(
            client,
            engine,
            queue,
            executor,
            artifacts=settings.artifact_root(engine),
            destinations=default_destinations(engine, settings.artifact_root(engine)),
            task_faults=faults,
            activity_slots=activity_slots,
            llm=llm,
        )
        async with worker:
            yield client, queue


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


def awaiting_approval(client: TestClient, owner: str) -> dict[str, Any]:
    """A new report task of ``owner``'s, once it waits for approval."""
    return wait_for(client, owner, start_task(client, owner)["task_id"], status_is("WAITING_FOR_APPROVAL"))


def publications(settings: Settings, engine: Engine, destination: str = "reports") -> list[Published]:
    """What ``destination`` holds, read as any replica reads it (the artifact store and PostgreSQL)."""
    return StoredDestination(destination, engine, settings.artifact_root(engine)).all_publications()
