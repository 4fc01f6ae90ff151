"""The console's CSRF defences, in one place: every token comparison and the sign-in form's signed token.

A comparison works on UTF-8 bytes, so a token of any text (non-ASCII, empty, huge) is refused with a 403
``csrf_failed``, never a ``TypeError`` from :func:`hmac.compare_digest` (which takes only ASCII ``str``).

Before a session exists, the sign-in form's token was a random value compared with a cookie: a page that
could plant a cookie on the console's site (a sibling subdomain, another port of the same host) chose both
halves and signed the victim in to the attacker's account. Now the cookie holds a random nonce and the form
holds ``<issued>.<HMAC(nonce, issued)>`` under a key derived from the server's signing key
(``MNEMO_CURSOR_KEYS``), so no pair can be made up, and it expires. Where the console runs over HTTPS the
cookie is ``__Host-`` (Secure, Path=/, no Domain), which no other site or subdomain can set at all — and so
is the session cookie, which a planted one would otherwise swap for the attacker's session; under ``mnemo
dev`` over plain http a browser would drop a ``__Host-`` cookie, so the plain names are kept there.
A browser's ``Sec-Fetch-Site`` of ``cross-site`` or ``same-site`` on any console POST is refused outright.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from starlette.requests import Request

from memory.errors import Forbidden
from memory.resources.cursors import CursorKeys

LOGIN_TOKEN_SECONDS = 3_600
_LABEL = b"mnemo console sign-in token v1"
_FOREIGN_SITES = frozenset({"cross-site", "same-site"})


class CsrfFailed(Forbidden):
    code = "csrf_failed"


def same_token(given: object, expected: str) -> bool:
    """Whether ``given`` (anything a form or cookie carried) is ``expected``, in constant time, for any text."""
    if not isinstance(given, str) or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def refuse_foreign_site(request: Request) -> None:
    """A browser says where a POST came from; one from another site (even a sibling subdomain) is refused."""
    if request.headers.get("sec-fetch-site", "").lower() in _FOREIGN_SITES:
        raise CsrfFailed("the form was sent from another site; open the console yourself and send it from there")


class LoginTokens:
    """Signs and checks the sign-in form's token, bound to the nonce in the pre-session cookie."""

    def __init__(self, keys: CursorKeys) -> None:
        # One key per signing key (rotation: the first signs, all verify), separated from the cursors' use.
        self._keys = [hmac.new(secret, _LABEL, hashlib.sha256).digest() for _, secret in keys.keys]

    def issue(self, now: float | None = None) -> tuple[str, str]:
        """A fresh ``(cookie nonce, form token)`` pair."""
        nonce, issued = secrets.token_urlsafe(32), str(int(now if now is not None else time.time()))
        return nonce, f"{issued}.{self._mac(self._keys[0], nonce, issued)}"

    def check(self, nonce: str | None, token: str, now: float | None = None) -> None:
        """:class:`CsrfFailed` unless ``token`` was issued with ``nonce`` by this server within the hour."""
        issued, _, mac = token.partition(".")
        at = now if now is not None else time.time()
        fresh = issued.isascii() and issued.isdigit() and 0 <= at - int(issued) <= LOGIN_TOKEN_SECONDS
        if not nonce or not fresh or not any(same_token(mac, self._mac(key, nonce, issued)) for key in self._keys):
            raise CsrfFailed("the sign-in form is stale or came from another site; open the sign-in page again")

    @staticmethod
    def _mac(key: bytes, nonce: str, issued: str) -> str:
        message = f"{issued}\x00".encode() + nonce.encode("utf-8", "surrogatepass")
        return hmac.new(key, message, hashlib.sha256).hexdigest()


def cookie(name: str, secure: bool, plain_path: str) -> tuple[str, str]:
    """The name and path of a console cookie: over HTTPS ``__Host-<name>`` on ``/``, which a browser accepts
    only from this origin (so no sibling subdomain or other port plants a sign-in nonce or a session of its
    own choosing); under ``mnemo dev``'s plain http, where a browser drops ``__Host-``, ``name`` on ``plain_path``."""
    return (f"__Host-{name}", "/") if secure else (name, plain_path)
