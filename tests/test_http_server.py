"""The server `mnemo api` runs (uvicorn, httptools) bounds a request head instead of buffering any size."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from api.httpserver import MAX_HEAD_BYTES
from api.main import create_app
from api.settings import Settings
from tests.workers import served


@pytest.fixture(scope="module")
def server(settings: Settings) -> Iterator[int]:
    with served(create_app(settings)) as port:
        yield port


def _exchange(port: int, head: bytes, chunk: int = 64 * 1024) -> bytes:
    """Send ``head`` in chunks (stopping if the server closes), then read the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        try:
            for start in range(0, len(head), chunk):
                connection.sendall(head[start:start + chunk])
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before the rest arrived: what a bounded head should do
        answer = b""
        try:
            while part := connection.recv(65536):
                answer += part
        except (ConnectionResetError, TimeoutError):
            pass
        return answer


def test_a_megabyte_header_is_cut_off_by_the_server(server: int) -> None:
    """A head that never ends: plain httptools would buffer all of it and wait for more (the app never sees
    it, so only the server can refuse it)."""
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_000_000  # no end of line, no end of head
    answer = _exchange(server, head)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b'"headers_too_large"' in answer


def test_a_head_between_the_app_and_the_server_limit_gets_the_apps_431(server: int) -> None:
    """Under MAX_HEAD_BYTES the request reaches the app, whose guard counts header fields exactly."""
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 17_000 + b"\r\nConnection: close\r\n\r\n"
    assert len(head) < MAX_HEAD_BYTES
    answer = _exchange(server, head)
    assert answer.startswith(b"HTTP/1.1 431 ") and b'"headers_too_large"' in answer, answer[:200]


def test_ordinary_requests_pass_on_a_kept_alive_connection(server: int) -> None:
    one = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Fine: " + b"c" * 12_000 + b"\r\n\r\n"
    last = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = _exchange(server, one * 3 + last)
    assert answer.count(b"HTTP/1.1 200 ") == 4, answer[:300]
