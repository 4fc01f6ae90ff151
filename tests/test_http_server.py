"""The server `mnemo api` runs (uvicorn, httptools) bounds a request head instead of buffering any size."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from api.httpserver import MAX_HEAD_BYTES
from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth
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


# --- every error answer is a complete response on a connection that stays usable (issue 23, finding 8) -----


class Broken(RuntimeError):
    """What the test-only route raises: an exception nothing in mnemo expects."""


class BrokenOutside:
    """A test-only middleware outside mnemo's own that fails on one path: what a bug in a middleware would do."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/test-only/broken-outside":
            raise Broken("a bug in a middleware")
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def breakable(settings: Settings) -> Iterator[int]:
    """The real app behind the real server, plus one test-only route that fails as a bug would."""
    app = create_app(settings)

    def broken() -> None:
        raise Broken("a bug nobody expected")

    app.add_api_route("/test-only/broken", broken, methods=["GET", "POST"])
    app.add_middleware(BrokenOutside)
    with served(app) as port:
        yield port


def _answer(connection: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, object], str | None]:
    """One exchange on a kept-alive connection: its status, its (complete) JSON body and its Connection header."""
    connection.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    payload = response.read()  # the whole body as its Content-Length says, or IncompleteRead
    return response.status, json.loads(payload), response.getheader("connection")


def test_a_500_leaves_the_connection_usable(breakable: int) -> None:
    """uvicorn closed the socket after Starlette's ServerErrorMiddleware re-raised the exception it had just
    answered, so a keep-alive client's next request failed although the 500 never said ``Connection: close``."""
    connection = http.client.HTTPConnection("127.0.0.1", breakable, timeout=10)
    try:
        status, body, closing = _answer(connection, "GET", "/test-only/broken")
        assert status == 500 and body["error"]["code"] == "internal_error", body  # type: ignore[index]
        assert closing is None or closing.lower() != "close"
        status, body, _ = _answer(connection, "GET", "/healthz")
        assert status == 200, body
    finally:
        connection.close()


def test_every_kind_of_error_answer_keeps_the_connection_or_says_close(breakable: int, make_key: MakeKey) -> None:
    """One connection through a 500, 404, 405, 401, 422 (a bad body, a reversed validity window), a 413, 431
    from the app: each answer is complete, and either the next request on it succeeds or the answer said close."""
    key = make_key()
    window = {"effective_from": "2026-06-02T00:00:00Z", "effective_to": "2026-06-01T00:00:00Z"}
    reversed_window = json.dumps({"category": "PROFILE", "space": "USER", "content": "x", "source_level": "E2",
                                  "source": {"source_id": "s", "source_type": "t",
                                             "captured_at": "2026-06-01T09:00:00Z"},
                                  "validity": window}).encode()
    exchanges: list[tuple[str, str, bytes | None, dict[str, str], int]] = [
        ("POST", "/test-only/broken", b"{}", {}, 500),
        ("GET", "/no-such-endpoint", None, {}, 404),
        ("DELETE", "/healthz", None, {}, 405),
        ("GET", "/memories/00000000-0000-0000-0000-000000000000", None, {}, 401),
        ("POST", "/memory-candidates", b'{"category": ', auth(key), 422),
        ("POST", "/memory-candidates", reversed_window, auth(key), 422),
        ("GET", "/healthz", None, {"X-Big": "a" * 17_000}, 431),
        ("POST", "/memory-candidates", b"x" * (1 << 20) + b"x", auth(key), 413),
    ]
    connection = http.client.HTTPConnection("127.0.0.1", breakable, timeout=10)
    try:
        for method, path, body, headers, expected in exchanges:
            status, answer, closing = _answer(connection, method, path, body, headers)
            assert status == expected and "code" in answer["error"], (path, status, answer)  # type: ignore[operator]
            if closing is not None and closing.lower() == "close":
                connection.close()  # said so: the client opens a new connection, as it should
            status, _, _ = _answer(connection, "GET", "/healthz")
            assert status == 200, (method, path)
    finally:
        connection.close()


def test_a_500_from_outside_the_app_says_connection_close(breakable: int) -> None:
    """The one 500 the server still ends the connection after (the exception passed every mnemo middleware):
    the answer is complete and says so, and a new connection works."""
    connection = http.client.HTTPConnection("127.0.0.1", breakable, timeout=10)
    try:
        status, body, closing = _answer(connection, "GET", "/test-only/broken-outside")
        assert status == 500 and body["error"]["code"] == "internal_error", body  # type: ignore[index]
        assert closing is not None and closing.lower() == "close"
        connection.close()
        status, _, _ = _answer(connection, "GET", "/healthz")  # http.client reconnects
        assert status == 200
    finally:
        connection.close()
