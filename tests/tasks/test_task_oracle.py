"""Another user's task is indistinguishable from a missing one (issue 12, finding 11).

Before the fix, pause / resume / cancel of a colleague's task answered 403 (a random id: 404), and
GET and a RESUME_TASK recall asked Temporal before deciding, so they took about twice as long as a
random id. The timing is checked structurally, not with a stopwatch: an API whose Temporal client
points at a dead port still refuses the colleague, with the very 404 the live API gives a random id,
so the refusal cannot have waited on Temporal.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from tests.conftest import auth
from tests.tasks.conftest import Team, start_task, status_is, wait_for
from tests.workers import ThreadWorker


@pytest.fixture()
def no_temporal(settings: Settings) -> Iterator[TestClient]:
    """The same database, but Temporal at a port where nothing listens."""
    with TestClient(create_app(settings.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"}))) as api:
        yield api


def _calls(task_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    recall = {"query": "where was I", "intent": "RESUME_TASK", "task_id": task_id}
    return [
        ("GET", f"/tasks/{task_id}", None),
        ("GET", f"/tasks/{task_id}/timeline", None),
        ("POST", f"/tasks/{task_id}/pause", None),
        ("POST", f"/tasks/{task_id}/resume", None),
        ("POST", f"/tasks/{task_id}/cancel", None),
        ("POST", "/memory-query", recall),
    ]


def _answer(api: TestClient, key: str, method: str, path: str, body: dict[str, Any] | None, task_id: str) -> Any:
    response = api.request(method, path, json=body, headers=auth(key))
    error = response.json()["error"]
    error.pop("request_id", None)
    return response.status_code, str(error).replace(task_id, "<id>")


def test_a_colleagues_task_answers_like_a_missing_one_without_asking_temporal(
    client: TestClient, no_temporal: TestClient, task_worker: ThreadWorker, team: Team
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    missing = str(uuid.uuid4())
    for (method, path, body), (_, missing_path, missing_body) in zip(_calls(task_id), _calls(missing), strict=True):
        nothing = _answer(client, team.other_user, method, missing_path, missing_body, missing)
        assert nothing[0] == 404, (path, nothing)
        for api in (client, no_temporal):
            assert _answer(api, team.other_user, method, path, body, task_id) == nothing, (path, api is client)
    # Nothing changed, and the owner still reads the live task.
    assert wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))["pause_requested"] is False


def test_callers_who_may_see_the_task_still_reach_temporal(
    client: TestClient, no_temporal: TestClient, task_worker: ThreadWorker, team: Team
) -> None:
    """The read-model gate refuses only those who may not see the task: the owner and a reader go on to
    Temporal (a 503 when it is down, never a 404), and a reader who may not control it gets the 403."""
    task_id = start_task(client, team.owner)["task_id"]
    wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    for key in (team.owner, team.approver, team.operator):
        down = no_temporal.get(f"/tasks/{task_id}", headers=auth(key))
        assert down.status_code == 503 and down.json()["error"]["code"] == "temporal_unavailable", down.text
    refused = client.post(f"/tasks/{task_id}/pause", headers=auth(team.approver))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden", refused.text
