"""Error responses: every error carries a machine code and a human sentence.

``{"error": {"code": "...", "message": "...", "details": {...}}}``; validation
errors add ``"fields"`` with one entry per problem, an unexpected failure a
``"request_id"``. The HTTP mapping of every error and the 401-before-422 order live here; what a request
may look like is :mod:`api.request_guard`'s, the errors in the OpenAPI :mod:`api.openapi`'s.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import refusal_of_key
from api.observability.logging import current_request
from api.services.client import TemporalUnavailable
from memory.db import is_connection_failure
from memory.errors import InvalidInput, MnemoError

log = logging.getLogger("mnemo.api")

_CODES = {
    "extra_forbidden": "unknown_field",
    "missing": "missing_field",
    "json_invalid": "invalid_json",
    "datetime_parsing": "invalid_timestamp",
    "datetime_from_date_parsing": "invalid_timestamp",
    "datetime_type": "invalid_timestamp",
    "timezone_aware": "invalid_timestamp",
    "timestamp_out_of_range": "timestamp_out_of_range",
    "null_not_allowed": "null_not_allowed",
    "identity_from_credentials": "identity_from_credentials",
    "batch_too_large": "batch_too_large",
}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def field_problem(error: dict[str, Any]) -> dict[str, Any]:
    location = ".".join(str(part) for part in error["loc"] if part != "body") or "body"
    code = _CODES.get(error["type"], "invalid_value")
    if code == "invalid_timestamp":
        message = f"{location}: expected an ISO 8601 timestamp with a time zone, e.g. 2026-06-01T09:00:00Z"
    elif code == "unknown_field":
        message = f"{location}: unknown field; see /docs for the fields this endpoint takes"
    else:
        message = f"{location}: {error['msg']}"
    return {"field": location, "code": code, "message": message}


# --- handlers ------------------------------------------------------------------------------------


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    refusal = await refusal_of_key(request) or request.scope.get(REFUSED)
    if refusal is not None:
        return await _mnemo_error(request, refusal)
    problems = [field_problem(error) for error in exc.errors()]
    first = problems[0] if problems else {"code": "invalid_input", "message": "the request is invalid"}
    return JSONResponse(
        status_code=422, content=error_body(first["code"], first["message"], fields=problems)
    )


async def _mnemo_error(_request: Request, exc: MnemoError) -> JSONResponse:
    return mnemo_error_response(exc)


def mnemo_error_response(exc: MnemoError) -> JSONResponse:
    """The response of a :class:`MnemoError`: its status, mnemo's error body, ``Retry-After`` when it knows when to
    come back (also answered outside the exception handlers, by :mod:`api.admission`)."""
    headers = {"WWW-Authenticate": "Bearer"} if exc.http_status == 401 else {}
    retry_after = exc.details.get("retry_after_seconds")
    if retry_after is not None:  # a 429 or 503 that knows when to come back says so
        headers["Retry-After"] = str(max(1, round(retry_after)))
    extra: dict[str, Any] = {"fields": exc.fields} if isinstance(exc, Refused) else {"details": exc.details}
    if isinstance(exc, Refused) and exc.details:
        extra["details"] = exc.details
    content = error_body(exc.code, exc.message, **extra)
    return JSONResponse(status_code=exc.http_status, content=content, headers=headers)


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (the router's own Allow names only its first match's),
    found by asking the routes about each method, as routing would (a probe scope, the request's untouched)."""
    allowed = []
    for method in _METHODS:
        probe = {key: value for key, value in request.scope.items() if key not in ("fastapi", "route")}
        probe["method"] = method
        if any(route.matches(probe)[0] == Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allowed = _allowed_methods(request)
        headers["Allow"] = ", ".join(allowed)
        return JSONResponse(
            status_code=405,
            content=error_body(
                "method_not_allowed",
                f"{request.method} is not served at {request.url.path}; use {' or '.join(allowed) or 'another path'}",
                allowed=allowed,
            ),
            headers=headers,
        )
    if exc.status_code == 404:
        return JSONResponse(
            status_code=404,
            content=error_body("not_found", f"there is no endpoint at {request.url.path}; see /docs"),
            headers=headers or None,
        )
    return JSONResponse(
        status_code=exc.status_code, content=error_body("http_error", str(exc.detail)), headers=headers or None
    )


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    """An exception nothing expected. Logged with its traceback under a request id; the answer names that id
    and nothing of the exception (whose text may hold SQL, parameters or content)."""
    context = current_request()
    request_id = context.request_id if context is not None else uuid.uuid4().hex
    log.error("unhandled %s in %s %s (request %s)", type(exc).__name__, request.method, request.url.path,
              request_id, exc_info=exc)
    return JSONResponse(
        status_code=500,
        content=error_body(
            "internal_error",
            f"the server failed to handle this request; retry, and if it persists report request id {request_id}",
            request_id=request_id,
        ),
        headers={"X-Request-ID": request_id},
    )


async def _outermost_error(request: Request, exc: Exception) -> JSONResponse:
    """An exception raised outside :class:`UnexpectedErrors` (by a middleware around it). Starlette's
    ServerErrorMiddleware re-raises it after this answer and uvicorn then drops the connection, so the answer
    says ``Connection: close``: a keep-alive client knows to open a new one."""
    response = await _internal_error(request, exc)
    response.headers["Connection"] = "close"
    return response


class UnexpectedErrors:
    """ASGI middleware: an unexpected exception becomes the 500 of :func:`_internal_error` here, and goes no
    further. Handled by Starlette's ServerErrorMiddleware instead, it was re-raised after the answer, and uvicorn
    closed the keep-alive connection of every 500 without ``Connection: close`` (issue 23, finding 8)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started:  # half an answer is out: only the server closing the connection can end it
                raise
            response = await _internal_error(Request(scope, receive), exc)
            await response(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    """Every error's answer. Call it after the middlewares that the 500 of an unexpected exception must pass
    through (it adds :class:`UnexpectedErrors` inside the middlewares added later, e.g. metrics and logging)."""
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(MnemoError, _mnemo_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_middleware(UnexpectedErrors)
    app.add_exception_handler(Exception, _outermost_error)


# --- what the request guard refuses --------------------------------------------------------------


REFUSED = "mnemo.refused"
"""Scope key under which :class:`api.request_guard.StrictJsonMiddleware` leaves what it refused, for
:func:`api.request_guard.refuse_guarded` (and for ``/mcp``, outside FastAPI's routing)."""


class Refused(MnemoError):
    """A request the guard refuses with a 422: its machine code, sentence and field."""

    http_status = 422

    def __init__(self, code: str, message: str, field: str = "body") -> None:
        super().__init__(message, code=code)
        self.fields = [{"field": field, "code": code, "message": message}]

    @classmethod
    def of(cls, exc: InvalidInput) -> Refused:
        """A domain refusal of body fields (``details.problems`` by JSON Pointer, or ``details.field``) in the
        body-validation shape: ``fields`` named like pydantic's (``goal.month``), the domain's details kept."""
        refused = cls(exc.code, exc.message, str(exc.details.get("field", "body")))
        problems = exc.details.get("problems")
        if problems:
            refused.fields = [{"field": p["path"].strip("/").replace("/", ".") or "body", "code": p["code"],
                               "message": p["message"]} for p in problems]
        refused.details = exc.details
        return refused


# --- a dependency that is down: a typed 503 with Retry-After, never a 500 -------------------------

RETRY_AFTER_SECONDS = 5
"""What a 503 for a dependency that is down asks the client to wait (``mnemo dev`` restarts one in seconds)."""


def _unavailable(code: str, message: str) -> JSONResponse:
    return JSONResponse(
        status_code=503, content=error_body(code, message), headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
    )


_STATEMENT_TIMEOUT = "57014"  # query_canceled: statement_timeout (memory.db.make_engine) or a cancel


def _sqlstate(exc: BaseException) -> str | None:
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    return getattr(exc, "sqlstate", None)


async def _database_error(_request: Request, exc: Exception) -> JSONResponse:
    if _sqlstate(exc) == _STATEMENT_TIMEOUT:
        return _unavailable(
            "statement_timeout", "the database took too long on this request and it was cancelled; retry shortly"
        )
    if not is_connection_failure(exc):
        raise exc
    return _unavailable("database_unavailable", "the database is unavailable; retry shortly")


async def _temporal_error(_request: Request, exc: Exception) -> JSONResponse:
    from temporalio.service import RPCError, RPCStatusCode

    if isinstance(exc, RPCError) and exc.status not in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
        raise exc
    message = exc.message if isinstance(exc, MnemoError) else "Temporal is unavailable; retry shortly"
    return _unavailable("temporal_unavailable", message)


def install_unavailable_handlers(app: FastAPI) -> None:
    """Map a database or Temporal that is down to ``database_unavailable`` / ``temporal_unavailable`` 503s."""
    import psycopg
    from sqlalchemy.exc import DBAPIError
    from temporalio.service import RPCError

    for database_error in (DBAPIError, psycopg.OperationalError, psycopg.InterfaceError):
        app.add_exception_handler(database_error, _database_error)
    for temporal_error in (RPCError, TemporalUnavailable):
        app.add_exception_handler(temporal_error, _temporal_error)
