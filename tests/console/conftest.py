"""The console against the real stack: the API behind a real uvicorn (for the browser) or a TestClient on
https (for the cookie's Secure flag), a real worker on a task queue of its own, and Debian's Chromium."""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Browser, Page, sync_playwright
from sqlalchemy import Engine

from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth
from tests.workers import ThreadWorker, served

CHROMIUM = "/usr/bin/chromium"
SMALL_DATASET = 2_400


@dataclass(frozen=True)
class Team:
    tenant: str
    owner: str
    approver: str
    operator: str


@pytest.fixture()
def team(make_key: MakeKey, engine: Engine) -> Team:
    """A fresh tenant with a small sales dataset; alice owns tasks, bob approves, olga operates."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    team = Team(
        tenant=tenant,
        owner=make_key(tenant=tenant, user="alice", roles=("memory_writer",)),
        approver=make_key(tenant=tenant, user="bob", roles=("approver",)),
        operator=make_key(tenant=tenant, user="olga", roles=("operator",)),
    )
    with tenant_session(engine, tenant) as session:
        seed_sales(session, tenant, total=SMALL_DATASET)
    return team


@pytest.fixture(scope="module")
def console_settings(settings: Settings) -> Settings:
    """The session's services, a task queue of this module's own, and a Temporal UI to link to."""
    return settings.model_copy(update={
        "task_queue": f"console-{uuid.uuid4().hex[:8]}", "temporal_ui_url": "http://127.0.0.1:8233",
    })


@pytest.fixture(scope="module")
def worker(console_settings: Settings, engine: Engine) -> Iterator[ThreadWorker]:
    running = ThreadWorker(console_settings, engine, console_settings.task_queue,
                           artifacts=console_settings.artifact_root(engine)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def https_client(console_settings: Settings, worker: ThreadWorker) -> Iterator[TestClient]:
    """The app as production runs it (Secure cookie), over https so the client sends that cookie back."""
    with TestClient(create_app(console_settings), base_url="https://testserver") as client:
        yield client


@pytest.fixture(scope="module")
def base_url(console_settings: Settings, worker: ThreadWorker) -> Iterator[str]:
    """The app behind a real uvicorn over plain http, as under `mnemo dev` (cookie not Secure)."""
    with served(create_app(console_settings.model_copy(update={"console_secure_cookie": False}))) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module (Debian's: `scripts/ensure-browser` installs it)."""
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: run scripts/ensure-browser"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    opened = context.new_page()
    yield opened
    context.close()


def sign_in(page: Page, base_url: str, key: str, path: str = "/console/") -> None:
    page.goto(f"{base_url}{path}")
    page.fill("#api_key", key)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def csrf_of(page: Page) -> str:
    token = page.get_attribute("input[name=csrf_token]", "value")
    assert token
    return token


# --- the API side, as a client would drive it -------------------------------------------------------


def start_task(api: httpx.Client | TestClient, key: str) -> str:
    body = {"task_type": "monthly-report", "request_intent_id": f"intent-{uuid.uuid4().hex[:8]}",
            "goal": {"month": "2026-06", "currency": "CNY"}}
    response = api.post("/tasks", json=body, headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["task_id"])


def wait_task(
    api: httpx.Client | TestClient, key: str, task_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    view: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = api.get(f"/tasks/{task_id}", headers=auth(key))
        assert response.status_code == 200, response.text
        view = response.json()
        if done(view):
            return view
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} never got there in {timeout}s; last: {view}")


def waiting_for_approval(view: dict[str, Any]) -> bool:
    return view["status"] == "WAITING_FOR_APPROVAL" and view.get("pending_approval") is not None


def form_token(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the page has no form with a CSRF token"
    return match.group(1)
