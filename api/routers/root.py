"""``GET /``: a browser lands on the console; an API client gets a map of the service instead of a bare 404."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse

from api.mcp.server import PATH as MCP_PATH
from api.schemas.health import IndexOut

router = APIRouter(tags=["health"])

CONSOLE = "/console/"


def wants_html(request: Request) -> bool:
    """A browser's navigation asks for ``text/html`` first; API clients ask for JSON or anything (``*/*``)."""
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() in ("text/html", "application/xhtml+xml") for part in accept.split(","))


@router.get(
    "/",
    response_model=IndexOut,
    responses={307: {"description": "A browser (Accept: text/html) is redirected to the console at /console/"}},
)
def index(request: Request) -> IndexOut | RedirectResponse:
    """Where mnemo's parts are. No key needed: it names paths, nothing of any tenant."""
    if wants_html(request):
        return RedirectResponse(CONSOLE, status_code=307)
    return IndexOut(service="mnemo", console=CONSOLE, docs="/docs", openapi="/openapi.json", health="/healthz",
                    ready="/readyz", metrics="/metrics", mcp=MCP_PATH)
