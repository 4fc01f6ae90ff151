"""The request guard: every rule about what a request may look like before it reaches a handler.

Headers over 16 KiB (431) and bodies over 1 MiB (413) are answered at once; anything else it refuses (duplicate
JSON keys, deep nesting, non-finite or huge numbers, a NUL or lone surrogate) is left in the scope as a
:class:`api.errors.Refused` and raised by :func:`refuse_guarded` after routing, so a route taking a key answers
its 401 first. Kept apart from the error responses (:mod:`api.errors`), which only map errors to answers.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import refusal_of_key
from api.errors import REFUSED, Refused, error_body

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


async def refuse_guarded(request: Request) -> None:
    """App-wide dependency, run before every route's own: the 422 the guard found, after the 401 of a request
    without a valid key to a route that takes one (routing had to happen first to know that)."""
    problem: Refused | None = request.scope.get(REFUSED)
    if problem is not None:
        raise await refusal_of_key(request) or problem


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

