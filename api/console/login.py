"""Signing in with an API key, the home page, and signing out."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from api.console.csrf import LOGIN_TOKEN_SECONDS, LoginTokens, login_cookie_name, refuse_foreign_site
from api.console.sessions import close_session, open_session
from api.console.web import (
    COOKIE,
    WHY_COOKIE,
    CheckedForm,
    ConsoleRoute,
    SignedIn,
    page,
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


def _set_login_cookie(response: Response, secure: bool, nonce: str) -> None:
    """``__Host-`` (Path=/) over HTTPS, where no other site can set it; the plain name on ``mnemo dev``'s http."""
    response.set_cookie(login_cookie_name(secure), nonce, httponly=True, samesite="strict", secure=secure,
                        path="/" if secure else "/console/login", max_age=LOGIN_TOKEN_SECONDS)


@router.get("/login")
def login_form(request: Request, settings: SettingsDep, next: str | None = None) -> HTMLResponse:
    nonce, token = _tokens(request).issue()
    response = page(request, "login.html", login_token=token, next=_safe_next(next), why=sign_in_reason(request))
    response.delete_cookie(WHY_COOKIE, path="/console/login")
    _set_login_cookie(response, settings.console_secure_cookie, nonce)
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
    cookie = login_cookie_name(settings.console_secure_cookie)
    _tokens(request).check(request.cookies.get(cookie), csrf_token)
    signed = open_session(engine, api_key)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        COOKIE, signed.session_id, httponly=True, samesite="strict", secure=settings.console_secure_cookie,
        path="/console",
    )
    response.delete_cookie(cookie, path="/" if settings.console_secure_cookie else "/console/login",
                           secure=settings.console_secure_cookie, httponly=True, samesite="strict")
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
