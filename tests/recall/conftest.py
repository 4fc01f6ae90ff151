"""A real worker (own thread, own task queue) that fills vectors with the real model, and helpers."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from api.settings import Settings
from api.temporal import connect
from tests.conftest import auth
from tests.factories import candidate
from tests.workers import ThreadWorker
from workflows.embedding import EmbedBacklogInput, EmbedBacklogResult, EmbedBacklogWorkflow


@pytest.fixture(scope="session")
def recall_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"task_queue": f"recall-test-{uuid.uuid4().hex[:8]}"})


@pytest.fixture(scope="session")
def recall_worker(recall_settings: Settings, engine: Engine) -> Iterator[None]:
    worker = ThreadWorker(recall_settings, engine, recall_settings.task_queue).start()
    yield
    worker.stop()


def embed_tenant(settings: Settings, tenant_id: str) -> EmbedBacklogResult:
    """Run the real embedding workflow for one tenant to completion."""

    async def go() -> EmbedBacklogResult:
        client = await connect(settings)
        return await client.execute_workflow(
            EmbedBacklogWorkflow.run, EmbedBacklogInput(tenant_id, batch_size=16),
            id=f"embed-test-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue,
        )

    return asyncio.run(go())


def write(client: TestClient, api_key: str, content: str, **overrides: Any) -> str:
    response = client.post("/memory-candidates", json=candidate(content, **overrides), headers=auth(api_key))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


def recall(client: TestClient, key: str, **body: Any) -> dict[str, Any]:
    response = client.post("/memory-query", json=body, headers=auth(key))
    assert response.status_code == 200, response.text
    bundle: dict[str, Any] = response.json()
    return bundle


def ids(bundle: dict[str, Any]) -> list[str]:
    return [item["memory_id"] for item in bundle["items"]]


@contextmanager
def explained(engine: Engine, marker: str, measure: Callable[[Any], int]) -> Iterator[list[int]]:
    """``measure`` of the real plan (EXPLAIN ANALYZE, FORMAT JSON, re-run) of each statement holding ``marker``."""
    found: list[int] = []

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if marker in statement and not statement.startswith("EXPLAIN"):
            with cursor.connection.cursor() as explaining:
                explaining.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
                plan = explaining.fetchone()[0]
            found.append(measure(plan if isinstance(plan, list) else json.loads(plan)))

    event.listen(engine, "before_cursor_execute", explain)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", explain)


def plan_total(node: Any, relation: str, of: Callable[[dict[str, Any]], float]) -> int:
    """The sum of ``of`` over the plan nodes that read ``relation``."""
    if isinstance(node, list):
        return sum(plan_total(child, relation, of) for child in node)
    plan = node.get("Plan", node)
    own = round(of(plan)) if plan.get("Relation Name") == relation else 0
    return own + sum(plan_total(child, relation, of) for child in plan.get("Plans", []))
