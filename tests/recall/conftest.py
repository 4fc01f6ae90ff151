"""A real worker (own thread, own task queue) that fills vectors with the real model, and helpers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

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
