"""An API with its own real worker for the session tests, and the steps every commit test takes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.settings import Settings
from tests.conftest import auth, poll
from tests.workers import api_with_worker

TERMINAL = {"completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion"}


@pytest.fixture(scope="module")
def sessions_api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "sessions") as client:
        yield client


def say(key: str, role: str, content: str, at: str = "2026-07-14T14:00:00+08:00", **extra: Any) -> dict[str, Any]:
    return {"idempotency_key": key, "role": role, "content": content, "created_at": at, **extra}


def post(client: TestClient, api_key: str, session_id: str, *messages: dict[str, Any]) -> list[str]:
    """Open the session if needed, post ``messages``; their event ids."""
    client.post("/sessions", json={"session_id": session_id}, headers=auth(api_key))
    answer = client.post(f"/sessions/{session_id}/messages", json={"messages": list(messages)}, headers=auth(api_key))
    assert answer.status_code in (200, 201), answer.text
    return [event["event_id"] for event in answer.json()["events"]]


def wait_commit(client: TestClient, api_key: str, session_id: str, commit_id: str, timeout: float = 60
                ) -> dict[str, Any]:
    """The commit's read model once its status is terminal."""
    return poll(client, api_key, f"/sessions/{session_id}/commits/{commit_id}",
                lambda body: body["status"] in TERMINAL, timeout)


def commit(client: TestClient, api_key: str, session_id: str, commit_id: str, timeout: float = 60) -> dict[str, Any]:
    """Commit and wait for the commit's terminal status; its read model."""
    accepted = client.post(f"/sessions/{session_id}/commit", json={"commit_id": commit_id}, headers=auth(api_key))
    assert accepted.status_code == 202, accepted.text
    return wait_commit(client, api_key, session_id, commit_id, timeout)
