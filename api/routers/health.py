"""Liveness and readiness."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from api.deps import EngineDep
from api.temporal import connect, namespace_ready

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up (no dependency checked)."""
    return {"status": "ok"}


def _check_database(engine: EngineDep) -> None:
    with engine.connect() as connection:
        connection.execute(text("SELECT 1 FROM tenants LIMIT 1"))


@router.get("/readyz")
async def readyz(request: Request, engine: EngineDep) -> JSONResponse:
    """Ready when PostgreSQL (with mnemo's schema) and Temporal (with mnemo's namespace) both answer."""
    checks: dict[str, str] = {}
    try:
        await asyncio.to_thread(_check_database, engine)
        checks["postgres"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure is reported, none is hidden
        checks["postgres"] = f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        if request.app.state.temporal is None:
            request.app.state.temporal = await asyncio.wait_for(connect(request.app.state.settings), 5)
        await asyncio.wait_for(namespace_ready(request.app.state.temporal), 5)
        checks["temporal"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["temporal"] = f"error: {type(exc).__name__}: {exc}"
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse(status_code=200 if ready else 503, content={"ready": ready, "checks": checks})
