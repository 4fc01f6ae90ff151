"""Signing in with an API key, the home page, and signing out."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from api.console.sessions import close_session, open_session
from api.console.web import (
    COOKIE,
    LOGIN_COOKIE,
    WHY_COOKIE,
    CheckedForm,
    ConsoleRoute,
    SignedIn,
    page,
    sign_in_reason,
    to_sign_in,
)
from api.deps import EngineDep, SettingsDep
from memory.errors import Forbidden

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


def _safe_next(target: str | None) -> str:
    """Only a console path: never an address elsewhere (an open redirect)."""
    if target and target.startswith("/console/") and not target.startswith("//"):
        return target
    return "/console/"


@router.get("/login")
def login_form(request: Request, next: str | None = None) -> HTMLResponse:
    token = secrets.token_urlsafe(32)
    response = page(request, "login.html", login_token=token, next=_safe_next(next), why=sign_in_reason(request))
    response.delete_cookie(WHY_COOKIE, path="/console/login")
    response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/console/login",
                        secure=request.app.state.settings.console_secure_cookie, max_age=3600)
    return response


@router.post("/login")
def login(
    request: Request,
    engine: EngineDep,
    settings: SettingsDep,
    api_key: Annotated[str, Form(max_length=200)],
    csrf_token: Annotated[str, Form(max_length=100)],
    next: Annotated[str | None, Form(max_length=2_000)] = None,
) -> Response:
    """A good key opens a session; a bad one is the API's 401 sentence on an HTML page."""
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not hmac.compare_digest(expected, csrf_token):
        raise Forbidden("the sign-in form is stale or came from another site; open the sign-in page again",
                        code="csrf_failed")
    signed = open_session(engine, api_key)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        COOKIE, signed.session_id, httponly=True, samesite="strict", secure=settings.console_secure_cookie,
        path="/console",
    )
    response.delete_cookie(LOGIN_COOKIE, path="/console/login")
    return response


@router.get("/")
def home(request: Request, signed: SignedIn) -> HTMLResponse:
    return page(request, "home.html")


@router.post("/logout")
def logout(request: Request, engine: EngineDep, signed: CheckedForm) -> Response:
    close_session(engine, signed.session_id)
    response = to_sign_in(request, "you signed out")
    response.delete_cookie(COOKIE, path="/console")
    return response
