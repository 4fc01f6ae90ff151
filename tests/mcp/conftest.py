"""The MCP endpoint under test: the real app behind a real uvicorn, reached with the official SDK client
(``mcp.client.streamable_http`` + ``ClientSession``) over HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from api.main import create_app
from api.settings import Settings
from tests.workers import served


@pytest.fixture(scope="session")
def mcp_url(settings: Settings) -> Iterator[str]:
    """The API (legacy tools off, the default) on a free port; its MCP endpoint's URL."""
    with served(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def mcp_session(
    url: str, key: str, headers: dict[str, str] | None = None
) -> AsyncIterator[tuple[ClientSession, httpx2.AsyncClient]]:
    """An initialized session of the official client, authenticated with ``key`` (and sending ``headers``);
    its HTTP client too, whose headers a test may change (another key on the same session)."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}", **(headers or {})}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session, http


def error_of(result: CallToolResult) -> dict[str, Any]:
    """mnemo's error body of a tool error (``{"code", "message", ...}``), checked to be one."""
    assert result.is_error, result
    assert result.structured_content is not None
    text = result.content[0]
    assert text.type == "text" and json.loads(text.text) == result.structured_content
    error: dict[str, Any] = result.structured_content["error"]
    return error


def data_of(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    data: dict[str, Any] | None = result.structured_content
    assert data is not None
    return data
