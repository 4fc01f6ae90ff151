"""Issue 24, item 1: a second API replica, with a data directory of its own (same PostgreSQL and Temporal), serves
the artifacts a worker wrote, with either artifact store. Before the shared store it answered 500
(FileNotFoundError): the bytes were files in the worker's data directory."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.main import create_app
from api.settings import Settings
from memory.artifact_store import read
from memory.tasks.artifacts import task_store
from tests.conftest import MakeKey, auth, s3_settings
from tests.tasks.conftest import Team, start_task, status_is, wait_for
from tests.workers import ThreadWorker


@pytest.mark.parametrize("kind", ["postgres", "s3"])
def test_a_second_replica_serves_what_the_worker_wrote(
    kind: str, settings: Settings, engine: Engine, team: Team, make_key: MakeKey, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    base = settings if kind == "postgres" else s3_settings(settings, request.getfixturevalue("s3_standin"))
    worker_settings = base.model_copy(update={"task_queue": f"replicas-{uuid.uuid4().hex[:8]}",
                                              "data_dir": tmp_path / "worker"})
    first = worker_settings.model_copy(update={"data_dir": tmp_path / "api-1"})
    second = worker_settings.model_copy(update={"data_dir": tmp_path / "api-2"})
    worker = ThreadWorker(worker_settings, engine, worker_settings.task_queue,
                          artifacts=worker_settings.artifact_root(engine)).start()
    try:
        with TestClient(create_app(first)) as api_1, TestClient(create_app(second)) as api_2:
            task_id = start_task(api_1, team.owner)["task_id"]
            view = wait_for(api_1, team.owner, task_id, status_is("WAITING_FOR_APPROVAL", "FAILED"), timeout=90)
            assert view["status"] == "WAITING_FOR_APPROVAL", view
            draft = view["draft_sha256"]
            served = api_2.get(f"/tasks/{task_id}/artifacts/{draft}", headers=auth(team.owner))
            assert served.status_code == 200, served.text
            manifest = served.json()
            chart = api_2.get(f"/tasks/{task_id}/artifacts/{manifest['html_sha256']}", headers=auth(team.owner))
            assert chart.status_code == 200 and chart.headers["content-length"] == str(len(chart.content))
            stored = task_store(worker_settings.artifact_root(engine))
            assert served.content == read(stored, draft) and chart.content == read(stored, manifest["html_sha256"])
            # Another tenant's key cannot tell it from a missing artifact.
            stranger = make_key(tenant=f"t-{uuid.uuid4().hex[:12]}", user="alice")
            other = api_2.get(f"/tasks/{task_id}/artifacts/{draft}", headers=auth(stranger))
            assert (other.status_code, other.json()["error"]["code"]) == (404, "not_found"), other.text
            # Bytes the store lost are a typed error naming what to do, not a 500 of a FileNotFoundError.
            assert stored.delete(draft)
            lost = api_2.get(f"/tasks/{task_id}/artifacts/{draft}", headers=auth(team.owner))
            assert (lost.status_code, lost.json()["error"]["code"]) == (500, "artifact_unavailable"), lost.text
            assert "mnemo import-artifacts" in lost.json()["error"]["message"]
    finally:
        worker.stop()
    assert not (tmp_path / "worker").exists() or not any((tmp_path / "worker").rglob("*"))
