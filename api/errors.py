"""Error responses: every 4xx carries a machine code and a human sentence.

``{"error": {"code": "...", "message": "...", "details": {...}}}``; validation
errors add ``"fields"`` with one entry per problem.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory.errors import MnemoError

MAX_BODY_BYTES = 1 << 20

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


async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [_field_problem(error) for error in exc.errors()]
    first = problems[0] if problems else {"code": "invalid_input", "message": "the request is invalid"}
    return JSONResponse(
        status_code=422, content=error_body(first["code"], first["message"], fields=problems)
    )


async def _mnemo_error(_request: Request, exc: MnemoError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.http_status == 401 else None
    return JSONResponse(
        status_code=exc.http_status,
        content=error_body(exc.code, exc.message, details=exc.details),
        headers=headers,
    )


async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(status_code=exc.status_code, content=error_body(code, str(exc.detail)))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(MnemoError, _mnemo_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]


class _DuplicateKey(ValueError):
    pass


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class StrictJsonMiddleware:
    """Rejects JSON bodies with duplicate keys (which ``json.loads`` would silently collapse) or over 1 MiB."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await self._reply(send, 413, "body_too_large", f"request bodies are limited to {MAX_BODY_BYTES} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            json.loads(body or b"null", object_pairs_hook=_reject_duplicates)
        except _DuplicateKey as exc:
            await self._reply(send, 422, "duplicate_key", f"the JSON body repeats the key {exc.args[0]!r}")
            return
        except ValueError:
            pass  # not JSON: FastAPI reports it with its own typed error

        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    @staticmethod
    async def _reply(send: Send, status: int, code: str, message: str) -> None:
        payload = json.dumps(error_body(code, message)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})
