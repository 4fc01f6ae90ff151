"""The HTTP protocol `mnemo api` serves with: uvicorn's httptools protocol with a bounded request head.

httptools (llhttp) buffers a request's head without any limit, so a client could make the server hold a
megabyte header line (or a hundred) before the app sees anything; h11's limit would cost httptools' speed.
This protocol counts the bytes of each request head as they arrive and answers 431 and closes the
connection once they pass :data:`MAX_HEAD_BYTES`. Heads under that reach the app, whose
:class:`api.request_guard.StrictJsonMiddleware` applies the exact 16 KiB limit on header fields.
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from api.errors import error_body
from api.request_guard import MAX_HEADER_BYTES

MAX_HEAD_BYTES = MAX_HEADER_BYTES + 8 * 1024
"""Header fields (16 KiB) plus room for the request line (method, target, version)."""

_TOO_LARGE = json.dumps(
    error_body("headers_too_large", f"request headers are limited to {MAX_HEADER_BYTES} bytes in total; send less")
).encode()


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` that refuses a request head over :data:`MAX_HEAD_BYTES` with a 431."""

    _head_bytes: int | None = 0
    """Bytes received since the current request's head began; None while its body is being read."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_bytes = 0
        super().connection_made(transport)

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._head_bytes = 0  # a pipelined or keep-alive request's head comes next
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        if self._head_bytes is not None:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._head_bytes is not None and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self.logger.warning("Request head over %d bytes refused with 431.", MAX_HEAD_BYTES)
            self.transport.write(
                b"".join([
                    STATUS_LINE[431],
                    b"content-type: application/json\r\n",
                    b"content-length: " + str(len(_TOO_LARGE)).encode("ascii") + b"\r\n",
                    b"connection: close\r\n\r\n",
                    _TOO_LARGE,
                ])
            )
            self.transport.close()
