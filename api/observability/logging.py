"""One JSON line per log event: time, level, logger, message, trace and span ids, request id, route, tenant.

The request's context lives in a contextvar holding one mutable :class:`RequestContext`: the
middleware makes it, the key check fills in the tenant (:func:`bind_tenant`), and a handler's thread
(``run_in_threadpool`` copies the context) sees the same object. What a line never carries is the
request or response body: memory content, keys and draft text reach a log only if a message formats
them in, and none of mnemo's does (a test holds it to that for a request's lines).
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

from opentelemetry import trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER = b"x-request-id"


@dataclass
class RequestContext:
    request_id: str
    method: str
    route: str | None = None
    tenant_id: str | None = None


_current: ContextVar[RequestContext | None] = ContextVar("mnemo_request", default=None)


def current_request() -> RequestContext | None:
    return _current.get()


def bind_tenant(tenant_id: str) -> None:
    """The request's tenant, once its key is checked (identity comes from the key, never from a body)."""
    context = _current.get()
    if context is not None:
        context.tenant_id = tenant_id


FIELDS = ("status", "duration_ms", "workflow", "activity", "tenant_id", "task_queue", "namespace", "versions",
          "extractor", "activity_slots", "workflow_type", "workflow_id", "run_id", "activity_type", "activity_id",
          "attempt", "reason", "queued_ms", "jobs", "histories", "clean", "rows_ms", "histories_ms", "checks_ms")
"""Fields a line carries when its record has them (``extra=``): a request's, and the worker's
(:mod:`api.observability.worker_logging`). A request's tenant comes from its context."""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"], line["span_id"] = format(span.trace_id, "032x"), format(span.span_id, "016x")
        context = _current.get()
        if context is not None:
            line["request_id"] = context.request_id
            line["method"] = context.method
            if context.route is not None:
                line["route"] = context.route
            if context.tenant_id is not None:
                line["tenant_id"] = context.tenant_id
        for field in FIELDS:
            value = record.__dict__.get(field)
            if value is not None and field not in line:
                line[field] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str) -> None:
    """Every logger of the process (uvicorn's and the SDK's too) writes JSON lines to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # mnemo.request says the same, as JSON


access_log = logging.getLogger("mnemo.request")


class RequestLogging:
    """ASGI middleware: the request's context for every line logged while it runs, and one line when it ends."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        context = RequestContext(uuid.uuid4().hex, scope["method"])
        _current.set(context)
        status = 500
        started = datetime.now(UTC)

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                if not any(name.lower() == REQUEST_ID_HEADER for name, _ in headers):
                    headers.append((REQUEST_ID_HEADER, context.request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = scope.get("route")
            context.route = getattr(route, "path", None) or "unmatched"
            elapsed = (datetime.now(UTC) - started).total_seconds() * 1000
            access_log.info("request finished", extra={"status": status, "duration_ms": round(elapsed, 2)})
            # Not reset: an unhandled exception is answered outside this middleware (Starlette's
            # ServerErrorMiddleware), and its 500 names this request's id. Each request is a task of its own.
