"""The headers every console response carries, set in one place for every path under ``/console``.

Pages, redirects, error pages, the sign-in page and static files alike: no other site may frame them
(clickjacking an approval; ``frame-ancestors`` for current browsers, ``X-Frame-Options`` for old ones), and
no cache may keep them (a draft, a memory or a CSRF token left in a shared or back-button cache). A
response that already declares its ``frame-ancestors`` keeps it — the draft's HTML, framed by the task page
itself, says ``'self'`` — and any other policy it sends is kept, with ``frame-ancestors`` added to it.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/console"
DENY_FRAMING = "frame-ancestors 'none'"


def merged_policy(policy: str | None) -> str:
    """``policy`` with ``frame-ancestors 'none'`` added, unless it already names its frame ancestors."""
    directives = [d.strip() for d in (policy or "").split(";") if d.strip()]
    if not any(d.lower().split()[0] == "frame-ancestors" for d in directives):
        directives.append(DENY_FRAMING)
    return "; ".join(directives)


class ConsoleHeaders:
    """ASGI middleware: adds the console's headers to every response of a path under ``/console``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                policy = merged_policy(headers.get("content-security-policy"))
                headers["Content-Security-Policy"] = policy
                self_only = "frame-ancestors 'self'" in policy.lower()
                headers["X-Frame-Options"] = "SAMEORIGIN" if self_only else "DENY"
                headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)
