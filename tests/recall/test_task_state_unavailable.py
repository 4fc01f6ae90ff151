"""A RESUME_TASK recall whose live task state cannot be read says so, and when to come back."""

from __future__ import annotations

from fastapi.testclient import TestClient

from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth


def test_task_state_unreadable_is_a_503_with_retry_after(settings: Settings, make_key: MakeKey) -> None:
    nowhere = settings.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"})  # nobody listens
    key = make_key()
    with TestClient(create_app(nowhere)) as api:
        response = api.post(
            "/memory-query",
            json={"query": "继续昨天的报告", "intent": "RESUME_TASK", "task_id": "t-1"},
            headers=auth(key),
        )
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "temporal_unavailable"  # not even connectable
    assert response.headers["Retry-After"] == "5"
