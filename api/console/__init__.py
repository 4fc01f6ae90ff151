"""The web console at /console/: server-rendered pages for approvers, operators, auditors and users."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.console import approvals, deletions, login, memories, tasks


def mount_console(app: FastAPI) -> None:
    """The console's pages and its stylesheet (no script, no build step)."""
    app.mount("/console/static", StaticFiles(directory=Path(__file__).parent / "static"), name="console-static")
    for module in (login, approvals, tasks, deletions, memories):
        app.include_router(module.router)
