"""STAND-IN for a tenant's webhook receiver (outside mnemo): a real HTTP server on loopback that records every
delivery and answers with the statuses it is told to, in order (then 200)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    answers: list[int]
    deliveries: list[Delivery] = field(default_factory=list)


@contextmanager
def webhook_receiver(*answers: int) -> Iterator[Receiver]:
    receiver = Receiver("", list(answers))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                receiver.deliveries.append(Delivery({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.answers.pop(0) if receiver.answers else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    with serving(Handler) as base:
        receiver.url = f"{base}/hooks/mnemo"
        yield receiver


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up before the answer (mnemo timed out) is the point of some tests, not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` behind a real HTTP server on loopback, in a thread: its base URL."""
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(10)
