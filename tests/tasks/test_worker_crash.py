"""Kill the worker process mid-step: a new worker finishes the task, and nothing exists twice."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from tests.conftest import auth
from tests.tasks.conftest import Team, approve, publications, start_task, status_is, wait_for
from tests.workers import ThreadWorker, worker_env


@pytest.fixture()
def isolated(settings: Settings) -> Iterator[tuple[Settings, TestClient]]:
    """An API on a task queue no other worker polls, so the test decides which worker runs what."""
    queue_settings = settings.model_copy(update={"task_queue": f"crash-{uuid.uuid4().hex[:8]}"})
    with TestClient(create_app(queue_settings)) as api:
        yield queue_settings, api


def _attempts(engine: Engine, tenant: str, task_id: str) -> list[tuple[str, str]]:
    with tenant_session(engine, tenant) as session:
        return [
            (row.step_id, row.status)
            for row in session.execute(
                text("SELECT step_id, status FROM task_attempts WHERE task_id = :t ORDER BY started_at"), {"t": task_id}
            )
        ]


def test_a_worker_killed_mid_step_is_replaced_and_the_task_finishes_once(
    isolated: tuple[Settings, TestClient], engine: Engine, team: Team
) -> None:
    queue_settings, api = isolated
    env = worker_env(
        queue_settings, MNEMO_DATA_DIR=str(queue_settings.data_dir), MNEMO_TASK_SLOW_STEPS="generate_charts=120"
    )
    doomed = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    replacement: ThreadWorker | None = None
    try:
        task_id = start_task(api, team.owner)["task_id"]
        deadline = time.monotonic() + 60
        while ("generate_charts", "RUNNING") not in _attempts(engine, team.tenant, task_id):
            assert time.monotonic() < deadline, _attempts(engine, team.tenant, task_id)
            assert doomed.poll() is None, "the worker died before the drill"
            time.sleep(0.1)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        replacement = ThreadWorker(
            queue_settings, engine, queue_settings.task_queue, artifacts=queue_settings.artifact_root(engine)
        ).start()
        view = wait_for(api, team.owner, task_id, status_is("WAITING_FOR_APPROVAL", "FAILED"), timeout=90)
        assert view["status"] == "WAITING_FOR_APPROVAL", view
        assert approve(api, team.approver, view).status_code == 200
        done = wait_for(api, team.owner, task_id, status_is("SUCCEEDED", "FAILED"))
    finally:
        if doomed.poll() is None:
            doomed.kill()
        if replacement is not None:
            replacement.stop()
    assert done["status"] == "SUCCEEDED", done
    attempts = _attempts(engine, team.tenant, task_id)
    charts = [a for a in attempts if a[0] == "generate_charts"]
    assert charts == [("generate_charts", "ABANDONED"), ("generate_charts", "SUCCEEDED")]
    assert sorted(step for step, status in attempts if status == "SUCCEEDED") == sorted(
        ["load_data", "validate_data", "calculate_metrics", "generate_charts", "generate_draft"]
    )
    with tenant_session(engine, team.tenant) as session:
        names = session.execute(
            text("SELECT name FROM task_artifacts WHERE task_id = :t"), {"t": task_id}
        ).scalars().all()
        published_ops = session.execute(
            text("SELECT count(*) FROM task_operations WHERE task_id = :t AND status = 'SUCCEEDED'"), {"t": task_id}
        ).scalar_one()
    assert len(names) == len(set(names)) == 10
    assert published_ops == 1
    pub_id = done["publications"][0]["publication_id"]
    assert [p.publication_id for p in publications(queue_settings, engine) if p.publication_id == pub_id] == [pub_id]
    timeline = api.get(f"/tasks/{task_id}/timeline", headers=auth(team.owner)).json()["entries"]
    abandoned = [e for e in timeline if e["kind"] == "attempt" and e["status"] == "ABANDONED"]
    assert abandoned[0]["error"]["code"] == "abandoned"
