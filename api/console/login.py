"""Signing in with an API key, the home page, and signing out."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from api.console.csrf import LOGIN_TOKEN_SECONDS, LoginTokens, cookie, refuse_foreign_site
from api.console.sessions import close_session, open_session
from api.console.web import (
    WHY_COOKIE,
    CheckedForm,
    ConsoleRoute,
    SignedIn,
    end_session_cookie,
    page,
    session_cookie,
    sign_in_reason,
    to_sign_in,
)
from api.deps import EngineDep, SettingsDep

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


def _safe_next(target: str | None) -> str:
    """Only a console path: never an address elsewhere (an open redirect)."""
    if target and target.startswith("/console/") and not target.startswith("//"):
        return target
    return "/console/"


def _tokens(request: Request) -> LoginTokens:
    tokens: LoginTokens = request.app.state.console_login_tokens
    return tokens


def _login_cookie(secure: bool) -> tuple[str, str]:
    return cookie("mnemo_console_login", secure, "/console/login")


@router.get("/login")
def login_form(request: Request, settings: SettingsDep, next: str | None = None) -> HTMLResponse:
    nonce, token = _tokens(request).issue()
    response = page(request, "login.html", login_token=token, next=_safe_next(next), why=sign_in_reason(request))
    response.delete_cookie(WHY_COOKIE, path="/console/login")
    name, path = _login_cookie(settings.console_secure_cookie)
    response.set_cookie(name, nonce, httponly=True, samesite="strict", secure=settings.console_secure_cookie, path=path,
                        max_age=LOGIN_TOKEN_SECONDS)
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
    refuse_foreign_site(request)
    login_name, login_path = _login_cookie(settings.console_secure_cookie)
    _tokens(request).check(request.cookies.get(login_name), csrf_token)
    signed = open_session(engine, api_key)
    response = RedirectResponse(_safe_next(next), status_code=303)
    name, path = session_cookie(request)
    response.set_cookie(name, signed.session_id, httponly=True, samesite="strict",
                        secure=settings.console_secure_cookie, path=path)
    response.delete_cookie(login_name, path=login_path, secure=settings.console_secure_cookie, httponly=True,
                           samesite="strict")
    return response


@router.get("/")
def home(request: Request, signed: SignedIn) -> HTMLResponse:
    return page(request, "home.html")


@router.post("/logout")
def logout(request: Request, engine: EngineDep, signed: CheckedForm) -> Response:
    close_session(engine, signed.session_id)
    response = to_sign_in(request, "you signed out")
    end_session_cookie(request, response)
    return response
