"""The web console at /console/: server-rendered pages for approvers, operators, auditors and users."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.console import approvals, deletions, knowledge, login, memories, tasks
from api.console.csrf import LoginTokens
from api.console.headers import ConsoleHeaders
from memory.resources.cursors import CursorKeys


def mount_console(app: FastAPI, keys: CursorKeys) -> None:
    """The console's pages and its stylesheet (no script, no build step), its headers, and the key that signs its
    sign-in tokens (derived from the server's signing ``keys``)."""
    app.state.console_login_tokens = LoginTokens(keys)
    app.add_middleware(ConsoleHeaders)
    app.mount("/console/static", StaticFiles(directory=Path(__file__).parent / "static"), name="console-static")
    for module in (login, approvals, knowledge, tasks, deletions, memories):
        app.include_router(module.router)
