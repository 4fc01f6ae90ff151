"""A stand-in for an LLM endpoint: the only thing in the suite that is not real.

A real OpenAI-compatible HTTP server on a real socket (127.0.0.1, a free port), started inside the test,
serving ``POST /v1/chat/completions`` from a queue of scripted replies, so the ``llm`` extractor's HTTP
client, timeouts, status handling and answer validation all run for real; only the model is scripted.
It records every request it receives, so tests can assert what the extractor sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: str = ""
    delay_seconds: float = 0.0


def completion(content: str, *, prompt_tokens: int = 120, completion_tokens: int = 40) -> Reply:
    """A 200 chat completion whose message content is ``content`` (the model's answer text)."""
    return Reply(body=json.dumps({
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "model": "standin",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }))


def answer(*candidates: dict[str, Any], **usage: int) -> Reply:
    """A completion whose answer is ``{"candidates": [...]}``."""
    return completion(json.dumps({"candidates": list(candidates)}, ensure_ascii=False), **usage)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class LlmStandIn:
    """The running stand-in: queue replies with :meth:`script`, read :attr:`received` afterwards."""

    base_url: str
    replies: deque[Reply] = field(default_factory=deque)
    received: list[Received] = field(default_factory=list)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


def _handler(standin: LlmStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            standin.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.path != "/v1/chat/completions":
                reply = Reply(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
            elif standin.replies:
                reply = standin.replies.popleft()
            else:
                reply = Reply(418, json.dumps({"error": {"message": "stand-in: no scripted reply left"}}))
            time.sleep(reply.delay_seconds)
            payload = reply.body.encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a slow reply beyond its timeout): nothing left to answer

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: pytest shows what the tests assert, not an access log."""

    return Handler


@contextmanager
def running_standin() -> Iterator[LlmStandIn]:
    """Serve on 127.0.0.1 on a port the kernel picks; stop when the block ends."""
    standin = LlmStandIn(base_url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(standin))
    server.daemon_threads = True
    standin.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    # A short poll interval: shutdown() waits for the loop to notice, once per test.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="llm-standin", daemon=True)
    thread.start()
    try:
        yield standin
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
