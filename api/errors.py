"""Error responses and the request guard: every error carries a machine code and a human sentence.

``{"error": {"code": "...", "message": "...", "details": {...}}}``; validation
errors add ``"fields"`` with one entry per problem, an unexpected failure a
``"request_id"``. Every rule about what a request may look like before it reaches a
handler lives here (:class:`StrictJsonMiddleware`), and so does the HTTP mapping
of every error, the 401-before-422 order and the error responses in the OpenAPI.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.observability.logging import current_request
from api.schemas.common import without_nul, without_null
from memory.db import is_connection_failure
from memory.errors import Forbidden, MnemoError, Unauthorized

log = logging.getLogger("mnemo.api")

MAX_BODY_BYTES = 1 << 20
MAX_HEADER_BYTES = 16 * 1024
"""All request header lines together (``name: value`` + CRLF each); more is a 431."""
MAX_JSON_DEPTH = 64
"""Nesting levels of arrays and objects in a JSON body; deeper is a 422 ``nesting_too_deep``."""

MAX_INTEGER_DIGITS = 4300
"""Python's own limit on converting a decimal string to int (``sys.get_int_max_str_digits``); a longer one made
FastAPI answer a bare 400."""

_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")
"""NUL (PostgreSQL text cannot hold it) and lone surrogates (not Unicode scalar values: not UTF-8 encodable)."""

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
}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def _field_problem(error: dict[str, Any]) -> dict[str, Any]:
    location = ".".join(str(part) for part in error["loc"] if part != "body") or "body"
    code = _CODES.get(error["type"], "invalid_value")
    if code == "invalid_timestamp":
        message = f"{location}: expected an ISO 8601 timestamp with a time zone, e.g. 2026-06-01T09:00:00Z"
    elif code == "unknown_field":
        message = f"{location}: unknown field; see /docs for the fields this endpoint takes"
    else:
        message = f"{location}: {error['msg']}"
    return {"field": location, "code": code, "message": message}


# --- authentication comes first ------------------------------------------------------------------


def _needs_key(route: Any) -> bool:
    """Whether the route takes an API key: it depends (at any depth) on :func:`api.deps.presented_key`."""
    if not isinstance(route, APIRoute):
        return False
    cached: bool | None = getattr(route, "_mnemo_needs_key", None)
    if cached is None:
        from api.deps import presented_key

        cached = False
        pending = [route.dependant]
        while pending and not cached:
            dependant = pending.pop()
            cached = dependant.call is presented_key
            pending.extend(dependant.dependencies)
        route._mnemo_needs_key = cached  # type: ignore[attr-defined]
    return cached


async def _refusal_of_key(request: Request) -> Unauthorized | Forbidden | None:
    """The 401 a request without a valid key deserves, or the 403 of a public client's key outside the public
    catalog, if its route takes a key: answered before any 422.

    Only called on an error path, so the extra key check costs a valid caller nothing.
    """
    if not _needs_key(request.scope.get("route")):
        return None
    from api.deps import authenticated, key_of, public_catalog_only

    try:
        key = key_of(request.headers.get("authorization", ""))
        principal = await run_in_threadpool(authenticated, key, request.app.state.engine)
        public_catalog_only(request, principal)
    except (Unauthorized, Forbidden) as exc:
        return exc
    return None


# --- handlers ------------------------------------------------------------------------------------


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    refusal = await _refusal_of_key(request) or request.scope.get(REFUSED)
    if refusal is not None:
        return await _mnemo_error(request, refusal)
    problems = [_field_problem(error) for error in exc.errors()]
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


# --- the request guard ---------------------------------------------------------------------------


REFUSED = "mnemo.refused"
"""Scope key under which :class:`StrictJsonMiddleware` leaves what it refused, for :func:`refuse_guarded`."""


class Refused(MnemoError):
    """A request the guard refuses with a 422: its machine code, sentence and field."""

    http_status = 422

    def __init__(self, code: str, message: str, field: str = "body") -> None:
        super().__init__(message, code=code)
        self.fields = [{"field": field, "code": code, "message": message}]


async def refuse_guarded(request: Request) -> None:
    """App-wide dependency, run before every route's own: the 422 the guard found, after the 401 of a request
    without a valid key to a route that takes one (routing had to happen first to know that)."""
    problem: Refused | None = request.scope.get(REFUSED)
    if problem is not None:
        raise await _refusal_of_key(request) or problem


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise Refused("duplicate_key", f"the JSON body repeats the key {key!r}")
        seen[key] = value
    return seen


def _not_a_number(name: str) -> float:
    raise Refused("invalid_number", f"the JSON body contains {name}: only finite numbers are accepted")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        _not_a_number(f"the number {literal[:40]}, beyond the range of a double")
    return value


def _integer(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INTEGER_DIGITS:  # int() itself refuses them, with a ValueError
        raise Refused("invalid_number", f"the JSON body contains an integer of {len(literal)} digits; "
                      f"integers are limited to {MAX_INTEGER_DIGITS} digits")
    return int(literal)


def _bad_character(where: str, text: str) -> Refused:
    found = _BAD_CHARACTER.search(text)
    assert found is not None
    name = "a NUL character (U+0000)" if found.group() == "\x00" else f"a lone surrogate (U+{ord(found.group()):04X})"
    return Refused(
        "invalid_character", f"{where} contains {name}, which cannot be stored; remove it or send valid Unicode",
        field=where,
    )


def _check_json(document: Any) -> None:
    """Depth and characters of a parsed body, walked iteratively (the body may be 1 MiB of nesting)."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if _BAD_CHARACTER.search(value):
                raise _bad_character(".".join(path) or "body", value)
        elif isinstance(value, (dict, list)):
            if len(path) >= MAX_JSON_DEPTH:
                raise Refused("nesting_too_deep", f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                where = (*path, str(key))
                if isinstance(key, str) and _BAD_CHARACTER.search(key):
                    raise _bad_character(".".join(where) + " (a key)", key)
                stack.append((item, where))


def check_body(body: bytes) -> None:
    """Refuse (:class:`Refused`) a JSON body PostgreSQL or the models could not take; a non-JSON body passes
    (FastAPI reports it with its own typed error)."""
    try:
        document = json.loads(
            body or b"null", object_pairs_hook=_reject_duplicates, parse_constant=_not_a_number, parse_float=_finite,
            parse_int=_integer,
        )
    except RecursionError:  # not a ValueError; a Refused from the hooks passes through as it is
        raise Refused("nesting_too_deep", f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except UnicodeDecodeError:  # FastAPI would answer a bare 400 "error parsing the body"
        raise Refused(
            "invalid_json", "the body is not valid UTF-8 (nor UTF-16 or UTF-32): send JSON in UTF-8"
        ) from None
    except ValueError:
        return
    _check_json(document)


def check_target(scope: Scope) -> None:
    """Refuse a NUL or lone surrogate in the path or in any query parameter (name or value)."""
    if _BAD_CHARACTER.search(scope["path"]):
        raise _bad_character("path", scope["path"])
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        for text in (name, value):
            if _BAD_CHARACTER.search(text):
                raise _bad_character(f"query.{name}", text)


def header_bytes(scope: Scope) -> int:
    """Bytes of the request's header lines as sent (``name: value`` and CRLF each)."""
    return sum(len(name) + len(value) + 4 for name, value in scope.get("headers", ()))


class StrictJsonMiddleware:
    """The request guard, before parsing: headers over 16 KiB (431) and bodies over 1 MiB (413) are answered
    here; duplicate JSON keys (which ``json.loads`` would silently collapse), nesting deeper than 64, NaN,
    Infinity or out-of-range numbers, and a NUL or lone surrogate in any string of the body, the path or the
    query are left in the scope for :func:`refuse_guarded` (a 422 after routing, so that a route taking a key
    answers 401 first), and the handler is given an empty body instead of the refused one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if header_bytes(scope) > MAX_HEADER_BYTES:
            await _reply(send, 431, error_body(
                "headers_too_large", f"request headers are limited to {MAX_HEADER_BYTES} bytes in total; send less"))
            return
        problem: Refused | None = None
        try:
            check_target(scope)
        except Refused as exc:
            problem = exc
        replay = receive
        if scope["method"] in ("POST", "PUT", "PATCH"):
            body = await _read_body(receive)
            if body is None:
                await _reply(send, 413, error_body(
                    "body_too_large", f"request bodies are limited to {MAX_BODY_BYTES} bytes"))
                return
            if problem is None:
                try:
                    check_body(body)
                except Refused as exc:
                    problem = exc
            replay = _replayer(b"" if problem is not None else body, receive)
        if problem is not None:
            scope[REFUSED] = problem
        await self.app(scope, replay, send)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, or None once it exceeds :data:`MAX_BODY_BYTES`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replayer(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _reply(send: Send, status: int, content: dict[str, Any]) -> None:
    payload = json.dumps(content).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


# --- the error responses in the OpenAPI ----------------------------------------------------------

_DESCRIPTIONS = {
    401: "No valid API key (always answered before any 422)",
    403: "The key's roles do not allow this",
    404: "No such object in the caller's tenant (another tenant's object gets the same answer)",
    409: "Conflicts with the current state (idempotency, a stale version, a closed task, ...)",
    413: f"Body over {MAX_BODY_BYTES} bytes",
    422: "The request is invalid: a typed code per problem",
    429: "Too many requests of the caller's tenant in flight, or workflow starts this minute (tenant_busy): "
         "retry after Retry-After",
    431: f"Request headers over {MAX_HEADER_BYTES} bytes in total",
    500: "An unexpected failure: nothing of it is shown, quote its request_id",
    503: "A dependency is down or too slow (database_unavailable, statement_timeout, temporal_unavailable, "
         "embedding_unavailable, ...): retry after Retry-After",
}


def error_statuses(method: str, operation: dict[str, Any], *, admitted: bool = False) -> list[int]:
    """The error statuses an OpenAPI operation may answer with: every one with the error body. ``admitted``: the
    operation has a per-tenant budget (:data:`api.admission.ROUTES`), so it may answer 429 ``tenant_busy``."""
    statuses = {422, 431, 500}  # the guard's 422s (a NUL in the query...) and 431 reach every route
    if method.upper() in ("POST", "PUT", "PATCH"):
        statuses.add(413)
    if operation.get("security"):  # it takes an API key (see api.deps.BEARER)
        # 503: every such operation reads the key from the database, which can be down or time out.
        statuses |= {401, 403, 404, 503}
        if method.upper() != "GET":
            statuses.add(409)
    if any(parameter.get("in") == "path" for parameter in operation.get("parameters", [])):
        statuses.add(404)
    if admitted:
        statuses.add(429)
    return sorted(statuses)


def install_openapi(app: FastAPI, error_model: type[Any]) -> None:
    """Every operation documents the errors it may answer with, all with ``error_model``'s body (instead of
    FastAPI's own 422 body, which mnemo never sends); a parameter's schema offers neither ``null`` nor a NUL."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        from api.admission import ROUTES

        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        document = error_model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(document.pop("$defs", {}))
        schemas[error_model.__name__] = document
        reference = {"$ref": f"#/components/schemas/{error_model.__name__}"}
        for route, path in schema.get("paths", {}).items():
            for method, operation in path.items():
                for parameter in operation.get("parameters", []):
                    without_null(parameter.get("schema", {}))
                    without_nul(parameter.get("schema", {}))
                for status in error_statuses(method, operation, admitted=(method.upper(), route) in ROUTES):
                    operation["responses"][str(status)] = {
                        "description": _DESCRIPTIONS[status], "content": {"application/json": {"schema": reference}},
                    }
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


# --- a dependency that is down: a typed 503 with Retry-After, never a 500 -------------------------

RETRY_AFTER_SECONDS = 5
"""What a 503 for a dependency that is down asks the client to wait (``mnemo dev`` restarts one in seconds)."""

class TemporalUnavailable(MnemoError):
    """Temporal could not be reached for a route that needs it."""

    code = "temporal_unavailable"
    http_status = 503


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
