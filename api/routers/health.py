"""Liveness and readiness.

``/readyz`` names each dependency with its state and answers 200 only when the stack can serve
everything it advertises: the database with mnemo's schema, Temporal with mnemo's namespace, a
worker polling the task queue (tasks, deletions and embeddings need one) and, under ``mnemo dev``
with its demo, the demo's sales data (a report task started before it fails with ``no_data``).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, text
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from api.deps import EngineDep, SettingsDep, get_temporal
from api.errors import RETRY_AFTER_SECONDS
from api.schemas.health import HealthOut, ReadinessOut
from api.services.client import TemporalUnavailable
from api.temporal import namespace_ready
from memory.db import tenant_session

router = APIRouter(tags=["health"])

CHECK_TIMEOUT_SECONDS = 5.0
POLLER_FRESH_SECONDS = 90.0
"""A poller seen this recently counts as a live worker: an idle worker's long poll is renewed about every
60 s, and Temporal lists a dead worker's pollers for minutes, so the time is what tells them apart."""
NOT_READY = "Not ready: each check that is not ok says why (Retry-After)"


@router.get("/healthz")
def healthz() -> HealthOut:
    """The process is up (no dependency checked)."""
    return HealthOut(status="ok")


def _error(exc: BaseException) -> dict[str, Any]:
    first = str(exc).splitlines()[0] if str(exc) else ""
    if not first and isinstance(exc, TimeoutError):
        first = f"no answer within {CHECK_TIMEOUT_SECONDS:.0f}s"
    return {"state": "unavailable", "error": f"{type(exc).__name__}: {first}"[:300]}


def _check_database(engine: Engine) -> dict[str, Any]:
    with engine.connect() as connection:
        connection.execute(text("SELECT 1 FROM tenants LIMIT 1"))
    return {"state": "ok"}


def _check_sample_data(engine: Engine, tenant_id: str) -> dict[str, Any]:
    """Seeding is one transaction, so any visible line means the whole dataset is there."""
    with tenant_session(engine, tenant_id) as session:
        seeded = session.execute(
            text("SELECT EXISTS (SELECT 1 FROM sales_order_lines WHERE tenant_id = :t)"), {"t": tenant_id}
        ).scalar_one()
    if seeded:
        return {"state": "ok", "tenant": tenant_id}
    return {"state": "loading", "tenant": tenant_id, "error": "the demo's sales data is still being loaded"}


async def _check_temporal(request: Request) -> tuple[dict[str, Any], Client | None]:
    try:
        client = await asyncio.wait_for(get_temporal(request), CHECK_TIMEOUT_SECONDS)
        await asyncio.wait_for(namespace_ready(client), CHECK_TIMEOUT_SECONDS)
    except TemporalUnavailable as exc:  # the check names what the client said, as a 503 would not
        return _error(exc.__cause__ or exc), None
    except Exception as exc:  # any failure is reported, none is hidden
        return _error(exc), None
    return {"state": "ok"}, client


async def _check_worker(client: Client, task_queue: str) -> dict[str, Any]:
    """Workers polling both halves of the task queue recently (Temporal's DescribeTaskQueue pollers)."""
    fresh_since = datetime.now(UTC) - timedelta(seconds=POLLER_FRESH_SECONDS)
    counts: dict[str, int] = {}
    for kind, queue_type in (("workflow", TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW),
                             ("activity", TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)):
        described = await asyncio.wait_for(
            client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=queue_type
                )
            ),
            CHECK_TIMEOUT_SECONDS,
        )
        counts[kind] = sum(
            1 for poller in described.pollers
            if poller.last_access_time.ToDatetime(tzinfo=UTC) >= fresh_since
        )
    state: dict[str, Any] = {"state": "ok" if all(counts.values()) else "unavailable", "task_queue": task_queue,
                             "pollers": counts}
    if state["state"] != "ok":
        state["error"] = f"no worker is polling the task queue {task_queue!r}"
    return state


@router.get(
    "/readyz",
    response_model=ReadinessOut,
    responses={503: {"model": ReadinessOut, "description": NOT_READY}},
)
async def readyz(request: Request, engine: EngineDep, settings: SettingsDep) -> JSONResponse:
    """Each dependency with its state; 200 only when all of them are ``ok``."""
    checks: dict[str, dict[str, Any]] = {}
    try:
        checks["database"] = await asyncio.wait_for(asyncio.to_thread(_check_database, engine), CHECK_TIMEOUT_SECONDS)
    except Exception as exc:  # reported as the check's error
        checks["database"] = _error(exc)
    checks["temporal"], client = await _check_temporal(request)
    if client is None:
        checks["worker"] = {"state": "unknown", "error": "Temporal is unavailable"}
    else:
        try:
            checks["worker"] = await _check_worker(client, settings.task_queue)
        except Exception as exc:  # reported as the check's error
            checks["worker"] = _error(exc)
    if settings.ready_sample_data_tenant:
        if checks["database"]["state"] != "ok":
            checks["demo_data"] = {"state": "unknown", "error": "the database is unavailable"}
        else:
            try:
                sample_data = asyncio.to_thread(_check_sample_data, engine, settings.ready_sample_data_tenant)
                checks["demo_data"] = await asyncio.wait_for(sample_data, CHECK_TIMEOUT_SECONDS)
            except Exception as exc:  # reported as the check's error
                checks["demo_data"] = _error(exc)
    ready = all(check["state"] == "ok" for check in checks.values())
    headers = None if ready else {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return JSONResponse(status_code=200 if ready else 503, content={"ready": ready, "checks": checks}, headers=headers)
