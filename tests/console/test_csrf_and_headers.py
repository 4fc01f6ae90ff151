"""The console's CSRF tokens and response headers against the real app (issue 23, finding 8).

Every console form route and every console page is found from the app's own routes, so a route added
later is covered without touching these tests.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import BaseRoute, Mount

from api.console.csrf import LOGIN_TOKEN_SECONDS, CsrfFailed, LoginTokens
from api.console.headers import merged_policy
from memory.resources.cursors import CursorKeys
from tests.conftest import MakeKey
from tests.console.conftest import form_token

LOGIN_COOKIES = ("__Host-mnemo_console_login", "mnemo_console_login")


def every_route(routes: list[BaseRoute], prefix: str = "") -> Iterator[tuple[str, BaseRoute]]:
    """The app's routes with their full path prefix (this FastAPI nests each included router in app.routes)."""
    for route in routes:
        nested = getattr(route, "original_router", None)
        if nested is not None:
            yield from every_route(nested.routes, prefix + route.include_context.prefix)  # type: ignore[attr-defined]
        else:
            yield prefix, route


def console_routes(client: TestClient) -> list[tuple[str, str]]:
    """(method, concrete path) of every console route of the app, path parameters filled with an unknown id."""
    found: list[tuple[str, str]] = []
    for prefix, route in every_route(client.app.routes):  # type: ignore[attr-defined]
        if isinstance(route, APIRoute) and (prefix + route.path).startswith("/console"):
            path = re.sub(r"\{[^}]+\}", f"x{uuid.uuid4().hex[:8]}", prefix + route.path)
            found += [(method, path) for method in sorted(route.methods or ())]
        elif isinstance(route, Mount) and (prefix + route.path).startswith("/console"):
            found.append(("GET", f"{prefix}{route.path}/console.css"))
    assert len(found) > 15, found  # the console's routes, not an empty list that proves nothing
    return found


def form_routes(client: TestClient) -> list[str]:
    return [path for method, path in console_routes(client) if method == "POST"]


@pytest.fixture()
def signed(https_client: TestClient, make_key: MakeKey) -> Iterator[TestClient]:
    """``https_client`` signed in (an admin, so that every form gets past its role check to the token)."""
    https_client.cookies.clear()
    token = form_token(https_client.get("/console/login").text)
    opened = https_client.post("/console/login", data={"api_key": make_key(roles=("admin", "operator", "approver")),
                                                       "csrf_token": token})
    assert opened.status_code == 200 and opened.url.path == "/console/", opened.text
    yield https_client
    https_client.cookies.clear()


HOSTILE_TOKENS = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.characters(min_codepoint=0x80, max_codepoint=0xD7FF), min_size=1, max_size=50),
    st.just(""),
    st.just("é" * 100_000),
    st.just("x" * 100_000),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.one_of(st.none(), HOSTILE_TOKENS))
def test_no_csrf_token_on_any_console_form_is_a_500(signed: TestClient, token: str | None) -> None:
    """Missing, empty, huge, non-ASCII: refused with a clear page (403 ``csrf_failed`` or 422), never a 500."""
    data = {} if token is None else {"csrf_token": token}
    for path in form_routes(signed):
        response = signed.post(path, data=data, follow_redirects=False)
        assert response.status_code in (403, 422), (path, response.status_code, response.text[:300])
        assert "csrf_failed" in response.text or "invalid_input" in response.text, (path, response.text[:300])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=HOSTILE_TOKENS, cookie=HOSTILE_TOKENS)
def test_no_login_token_or_cookie_is_a_500(https_client: TestClient, make_key: MakeKey, token: str,
                                           cookie: str) -> None:
    https_client.cookies.clear()
    cookie = "".join(c for c in cookie[:2000] if c.isprintable())  # a header carries no control characters
    raw = "; ".join(f"{name}={cookie}" for name in LOGIN_COOKIES).encode("utf-8")  # as a browser may send
    response = https_client.post("/console/login", data={"api_key": "mnemo_nope", "csrf_token": token},
                                 headers={b"cookie": raw})
    assert response.status_code in (403, 422), (response.status_code, response.text[:300])
    https_client.cookies.clear()


def test_a_login_token_and_cookie_made_up_by_an_attacker_are_refused(
    https_client: TestClient, make_key: MakeKey
) -> None:
    """Double submit without integrity let anyone who can plant a cookie pick the pair; now the server signs it."""
    key = make_key()
    for name in LOGIN_COOKIES:
        https_client.cookies.clear()
        https_client.cookies.set(name, "attacker-chosen")
        refused = https_client.post("/console/login", data={"api_key": key, "csrf_token": "attacker-chosen"})
        assert refused.status_code == 403 and "csrf_failed" in refused.text, name
        assert "__Host-mnemo_console" not in https_client.cookies
    https_client.cookies.clear()
    form = https_client.get("/console/login")
    real_token = form_token(form.text)
    cookie = next(c for c in form.headers.get_list("set-cookie") if "mnemo_console_login=" in c)
    assert cookie.startswith("__Host-mnemo_console_login=") and "secure" in cookie.lower() and "Path=/;" in cookie
    # A real token with another (planted) cookie, and a real cookie with a token altered by one character.
    https_client.cookies.clear()
    https_client.cookies.set("__Host-mnemo_console_login", "planted")
    assert https_client.post("/console/login", data={"api_key": key, "csrf_token": real_token}).status_code == 403
    https_client.cookies.clear()
    form = https_client.get("/console/login")
    altered = form_token(form.text)[:-1] + ("A" if not form_token(form.text).endswith("A") else "B")
    assert https_client.post("/console/login", data={"api_key": key, "csrf_token": altered}).status_code == 403
    opened = https_client.post("/console/login", data={"api_key": key, "csrf_token": form_token(form.text)})
    assert opened.status_code == 200 and opened.url.path == "/console/"
    https_client.cookies.clear()


def test_a_session_cookie_planted_without_the_host_prefix_opens_nothing(signed: TestClient) -> None:
    """Over HTTPS the session is read from ``__Host-mnemo_console`` only: a sibling subdomain can set a plain
    ``mnemo_console`` cookie (an attacker's own session, to make the victim act in it), never a ``__Host-`` one."""
    session_id = signed.cookies["__Host-mnemo_console"]
    assert signed.get("/console/", follow_redirects=False).status_code == 200
    signed.cookies.clear()
    signed.cookies.set("mnemo_console", session_id)
    planted = signed.get("/console/", follow_redirects=False)
    assert planted.status_code == 303 and planted.headers["location"].startswith("/console/login")


def test_a_form_posted_from_another_site_is_refused_even_with_the_right_token(signed: TestClient) -> None:
    token = form_token(signed.get("/console/").text)
    for site in ("cross-site", "same-site"):
        refused = signed.post("/console/logout", data={"csrf_token": token}, headers={"Sec-Fetch-Site": site})
        assert refused.status_code == 403 and "csrf_failed" in refused.text, site
    done = signed.post("/console/logout", data={"csrf_token": token}, headers={"Sec-Fetch-Site": "same-origin"},
                       follow_redirects=False)
    assert done.status_code == 303


def assert_console_headers(method: str, path: str, headers: Mapping[str, str]) -> None:
    h = {k.lower(): v for k, v in headers.items()}
    where = (method, path)
    assert h.get("cache-control") == "no-store", where
    policies = [p.strip() for p in h.get("content-security-policy", "").split(";")]
    ancestors = [p for p in policies if p.startswith("frame-ancestors")]
    assert ancestors in (["frame-ancestors 'none'"], ["frame-ancestors 'self'"]), (where, h)
    assert h.get("x-frame-options") == ("DENY" if ancestors == ["frame-ancestors 'none'"] else "SAMEORIGIN"), where
    if "/artifacts/" not in path:
        assert ancestors == ["frame-ancestors 'none'"], where


def test_every_console_response_forbids_framing_and_caching(https_client: TestClient, signed: TestClient) -> None:
    """Pages, redirects, error pages, the login, static files: signed out, then signed in (with and without a
    token), for every route of the app under /console."""
    routes = [*console_routes(signed), ("GET", "/console/no-such-page"), ("GET", "/console/login")]
    token = form_token(signed.get("/console/").text)
    for data in ({"csrf_token": token}, {}):
        for method, path in routes:
            response = signed.request(method, path, data=data if method == "POST" else None, follow_redirects=False)
            assert response.status_code < 500, (method, path, response.status_code)
            assert_console_headers(method, path, response.headers)
    signed.cookies.clear()
    for method, path in routes:
        response = signed.request(method, path, follow_redirects=False)
        assert response.status_code < 500, (method, path, response.status_code)
        assert_console_headers(method, path, response.headers)


def test_a_csp_a_console_page_already_sends_is_kept_and_frame_ancestors_added() -> None:
    """The artifact route sends its own CSP (no script); the console's headers merge with it, never replace it."""
    assert merged_policy(None) == "frame-ancestors 'none'"
    assert merged_policy("default-src 'none'") == "default-src 'none'; frame-ancestors 'none'"
    assert merged_policy("default-src 'none'; frame-ancestors 'self'") == "default-src 'none'; frame-ancestors 'self'"


def test_a_sign_in_token_expires_and_survives_a_key_rotation_but_not_a_retired_key() -> None:
    """The token is the server's signature of its nonce and time: an hour old, or signed by a key no longer
    configured, it is refused; signed by a key still configured (second after a rotation), it is accepted."""
    old = CursorKeys.parse(f"old:{'A' * 43}")
    rotated = CursorKeys.parse(f"new:{'B' * 43},old:{'A' * 43}")
    retired = CursorKeys.parse(f"new:{'B' * 43}")
    nonce, token = LoginTokens(old).issue(now=1_000_000)
    LoginTokens(old).check(nonce, token, now=1_000_000 + LOGIN_TOKEN_SECONDS)
    LoginTokens(rotated).check(nonce, token, now=1_000_001)
    for tokens, at in ((LoginTokens(old), 1_000_001 + LOGIN_TOKEN_SECONDS), (LoginTokens(old), 999_999),
                       (LoginTokens(retired), 1_000_001)):
        with pytest.raises(CsrfFailed):
            tokens.check(nonce, token, now=at)
    with pytest.raises(CsrfFailed):
        LoginTokens(old).check(nonce + "x", token, now=1_000_001)
