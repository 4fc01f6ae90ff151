"""What every console page shares: templates, the signed-in person, CSRF, and error pages.

The console is a thin HTML face on the API: its pages call the services the API's routers call
(``api.services.*``) with the principal of the session instead of a bearer key, so every rule (roles, the 404
of another's object, the approval's Update validator) is the API's, never a second copy. A
:class:`~memory.errors.MnemoError` raised anywhere in a page becomes an HTML page saying what happened and what to
do next.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, unquote

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from api.console.csrf import CsrfFailed, cookie, refuse_foreign_site, same_token
from api.console.sessions import COOKIE, Signed, SignedOut, resume_session
from api.deps import EngineDep, SettingsDep
from memory.enums import Role
from memory.errors import MnemoError
from memory.identity.auth import may_approve, may_operate, may_read_every_task

WHY_COOKIE = "mnemo_console_why"
"""Why the sign-in page is shown (signed out, idle, key revoked): set by the console only, never from a URL."""
_OUTCOMES = re.compile(
    r"approved|rejected|changes requested|pause|resume|cancel|resolved|expired|corrected to version [0-9]{1,10}")

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


def _span(seconds: float) -> str:
    minutes = round(abs(seconds) / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours = round(minutes / 60)
    return f"{hours} h" if hours < 48 else f"{round(hours / 24)} days"


def when(value: datetime | str | None, relative: bool = False, now: datetime | None = None) -> str:
    """A moment as a person reads it, saying its time zone: "Fri 3 Jul 2026, 14:00 UTC", and with ``relative``
    how far it is ("in 23 h", "5 min ago"). The console does not know the reader's zone, so it says UTC."""
    if value is None or value == "":
        return "-"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    moment = moment.astimezone(UTC)
    text = f"{moment:%a} {moment.day} {moment:%b %Y, %H:%M} UTC"
    if relative:
        seconds = (moment - (now or datetime.now(UTC))).total_seconds()
        text += f" (in {_span(seconds)})" if seconds >= 0 else f" ({_span(seconds)} ago)"
    return text


def human_size(size: int) -> str:
    """Bytes as a person reads them: 812 B, 3.4 KiB, 1.2 MiB."""
    if size < 1024:
        return f"{size} B"
    return f"{size / 1024:.1f} KiB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MiB"


def goal_text(goal: dict[str, Any]) -> str:
    """A goal of any definition as a line a person reads: each field named (``month 2026-06 · currency CNY``);
    nested values as compact JSON."""
    return " · ".join(f"{key} {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
                      for key, value in goal.items())


templates.env.filters["when"] = when
templates.env.filters["size"] = human_size
templates.env.filters["goal"] = goal_text

_NEXT_STEP = {
    401: "Sign in again with a valid API key.",
    403: "Ask an admin of your tenant for a key with the role this needs, or go back.",
    404: "Check the link; the object may have been deleted, or belong to someone else.",
    409: "Reload the page to see the current state, then decide again.",
    413: "Send less.",
    422: "Go back, correct the form and send it again.",
    429: "Wait a few seconds and try again.",
    503: "A service mnemo needs is down or busy; wait a few seconds and reload.",
}


def session_cookie(request: Request) -> tuple[str, str]:
    """The session cookie's name and path under this deployment's settings."""
    return cookie(COOKIE, request.app.state.settings.console_secure_cookie, "/console")


def end_session_cookie(request: Request, response: Response) -> None:
    name, path = session_cookie(request)
    response.delete_cookie(name, path=path, secure=request.app.state.settings.console_secure_cookie, httponly=True,
                           samesite="strict")


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render ``template`` with the signed-in person (when there is one) and their abilities."""
    signed: Signed | None = getattr(request.state, "signed", None)
    principal = signed.principal if signed else None
    roles = principal.roles if principal else frozenset()
    context |= {
        "signed": signed,
        "principal": principal,
        "can": {
            "approve": may_approve(roles),
            "operate": may_operate(roles),
            "read_all_tasks": may_read_every_task(roles),
            "admin": principal is not None and principal.has(Role.ADMIN),
            "review_knowledge": principal is not None and principal.has(Role.KNOWLEDGE_REVIEWER),
        },
    }
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def error_page(request: Request, status_code: int, code: str, message: str) -> HTMLResponse:
    return page(
        request, "error.html", status_code=status_code, code=code, message=message,
        next_step=_NEXT_STEP.get(status_code, "Go back and try again; if it persists, tell your operator."),
    )


def to_sign_in(request: Request, why: str, next_path: str | None = None) -> RedirectResponse:
    """To the sign-in page, which says ``why`` once: in a cookie only the console sets, so that a crafted link to
    the real sign-in page cannot make it say anything ("paste your key at ...")."""
    response = RedirectResponse("/console/login" + (f"?next={quote(next_path)}" if next_path else ""), 303)
    response.set_cookie(WHY_COOKIE, quote(why), max_age=60, httponly=True, samesite="strict", path="/console/login",
                        secure=request.app.state.settings.console_secure_cookie)
    return response


def sign_in_reason(request: Request) -> str | None:
    return unquote(request.cookies.get(WHY_COOKIE, "")) or None


def outcome(done: str | None) -> str | None:
    """The "Done:" notice after an action: one of the console's own outcomes, never a link's text."""
    return done if done is not None and _OUTCOMES.fullmatch(done) else None


class ConsoleRoute(APIRoute):
    """A console route: a mnemo error is an HTML page, and a person who is not signed in goes to the login."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except SignedOut as exc:
                if request.method == "GET":
                    return to_sign_in(request, exc.message,
                                      request.url.path + (f"?{request.url.query}" if request.url.query else ""))
                response = error_page(request, 401, exc.code, exc.message)
                end_session_cookie(request, response)
                return response
            except MnemoError as exc:
                return error_page(request, exc.http_status, exc.code, exc.message)
            except (RequestValidationError, ValidationError) as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'][-1:]))}: {e['msg']}" for e in exc.errors())
                return error_page(request, 422, "invalid_input", f"the form was not accepted ({problems})")

        return handle


async def signed_in(request: Request, engine: EngineDep, settings: SettingsDep) -> Signed:
    """The session of the request's cookie, its key judged again now (:class:`SignedOut` otherwise)."""
    name, _ = session_cookie(request)
    signed = resume_session(engine, request.cookies.get(name), timedelta(minutes=settings.console_idle_minutes))
    request.state.signed = signed
    return signed


SignedIn = Annotated[Signed, Depends(signed_in)]


async def checked_form(request: Request, signed: SignedIn) -> Signed:
    """A POST of a signed-in person whose form carries the session's CSRF token (403 ``csrf_failed`` else)."""
    refuse_foreign_site(request)
    form = await request.form()
    if not same_token(form.get("csrf_token"), signed.csrf_token):
        raise CsrfFailed(
            "the form did not carry this session's security token (it may be from another tab or an old page)"
        )
    return signed


CheckedForm = Annotated[Signed, Depends(checked_form)]


def back_to(url: str) -> RedirectResponse:
    """After a POST that worked: the page that shows its result (303, so a reload does not repeat it)."""
    return RedirectResponse(url, status_code=303)
