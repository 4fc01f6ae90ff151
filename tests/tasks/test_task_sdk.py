"""Task types of a team's own package, written with the public SDK and loaded by ``MNEMO_TASK_MODULES``, run by
the engine like the monthly report: started over REST with their goal checked against their goal schema, approved,
published exactly once; a running task keeps the definition it started with."""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from activities.stores import default_destinations
from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from memory.reports.monthly import MONTHLY
from memory.tasks import registry
from memory.tasks.builtin import MONTHLY_REPORT_V1_BODY
from memory.tasks.definitions import InvalidDefinition, from_body
from memory.tasks.sdk import StepOutcome, TaskType
from tests.conftest import MakeKey, auth
from tests.tasks.conftest import approve, publications, status_is, wait_for
from tests.tasks.sdk_package import rewrite, write_package
from tests.workers import ThreadWorker, worker_env


@dataclass(frozen=True)
class Team:
    client: TestClient
    settings: Settings
    root: Path
    module: str
    task_type: str
    owner: str
    approver: str


@pytest.fixture(scope="module")
def sdk(settings: Settings, engine: Engine, make_key: MakeKey,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    """An API and a worker configured as a team would run them: ``MNEMO_TASK_MODULES`` names the team's module."""
    root = tmp_path_factory.mktemp("team")
    task_type = f"digest-{uuid.uuid4().hex[:6]}"
    module = write_package(root, task_type=task_type)
    own = settings.model_copy(update={"task_modules": f" {module} ,", "task_queue": f"sdk-{uuid.uuid4().hex[:8]}"})
    artifacts = own.artifact_root(engine)
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=artifacts, task_modules=own.task_module_names(),
                          destinations=default_destinations(engine, artifacts, "timeout-after-store")).start()
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    try:
        with TestClient(create_app(own)) as client:
            yield Team(client, own, root, module, task_type, make_key(tenant=tenant, user="alice"),
                       make_key(tenant=tenant, user="bob", roles=("approver",)))
    finally:
        worker.stop()


def _start(team: Team, goal: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Start a task as a polite client does: a 429 (the tenant's burst of workflow starts) waits its Retry-After."""
    body = {"task_type": team.task_type, "request_intent_id": uuid.uuid4().hex, "goal": goal, **extra}
    for _ in range(30):
        response = team.client.post("/tasks", json=body, headers=auth(team.owner))
        if response.status_code != 429:
            break
        time.sleep(float(response.headers["Retry-After"]))
    assert response.status_code == 201, response.text
    return dict(response.json())


def _waiting(team: Team, task_id: str) -> dict[str, Any]:
    return wait_for(team.client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL", "FAILED", "SUCCEEDED"))


def test_the_monthly_report_module_declares_the_frozen_v1_body() -> None:
    """Older tasks run the frozen copy; new ones pin what the SDK module declares: the two are the same data."""
    assert MONTHLY.definition() == MONTHLY_REPORT_V1_BODY
    assert MONTHLY.parsed().version == "monthly-report-v1"


def test_the_sdk_declares_every_step_kind_as_the_api_would_take_it() -> None:
    """agent and llm steps too: the body is the one ``PUT /task-definitions`` checks, refused the same way."""
    name = f"sdk-kinds-{uuid.uuid4().hex[:6]}"
    kinds = TaskType(name, "1", {"type": "object"}, redraft_step="render")
    kinds.agent("collect", description="collect the incidents", timeout_seconds=3600)
    kinds.llm("summarise", prompt="Summarise {{artifacts.collect/incidents.json}} with {{bundle}}",
              recall={"query": "runbook for {{goal.service}}"}, output_schema={"type": "object"})
    kinds.compute("render", recall={"query": "house style"})(lambda ctx: StepOutcome({}))
    kinds.approval("review", artifact_from="render/digest.md")
    kinds.publish("send", destination="archive")
    parsed = kinds.parsed()
    assert [(step.step_id, step.kind) for step in parsed.steps] == [
        ("collect", "agent"), ("summarise", "llm"), ("render", "compute"), ("review", "approval"),
        ("send", "publish")]
    assert dict(parsed.step("collect").spec) == {"description": "collect the incidents", "timeout_seconds": 3600}
    assert parsed.step("render").spec["recall"] == {"query": "house style"}
    # Refused as PUT refuses it (the body is not declared: a refused type in the registry breaks every listing).
    body = kinds.definition()
    body["steps"][1].pop("recall")  # {{bundle}} with no recall: nothing to quote
    with pytest.raises(InvalidDefinition) as refused:
        from_body(name, body)
    assert refused.value.details["problems"][0]["path"] == "/steps/1/prompt"


def test_a_module_that_cannot_be_imported_is_named() -> None:
    with pytest.raises(Exception) as refused:
        registry.load(["no_such_team.tasks"])
    assert getattr(refused.value, "code", None) == "unknown_task_module" and "no_such_team.tasks" in str(refused.value)


def test_a_data_only_type_runs_from_rest_to_its_publication(sdk: Team, settings: Settings, engine: Engine) -> None:
    created = _start(sdk, {"topic": "outages in June"})
    view = _waiting(sdk, created["task_id"])
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    expected = b"Digest of outages in June, revision 1"
    assert view["pending_approval"]["artifact_sha256"] == hashlib.sha256(expected).hexdigest()
    assert (view["workflow_version"], view["current_step_id"], view["completed_step_ids"]) == ("1", "review", ["write"])
    rejected = approve(sdk.client, sdk.approver, view, decision="reject", reason="say who was paged")
    assert rejected.status_code == 200, rejected.text
    view = wait_for(sdk.client, sdk.owner, created["task_id"],
                    lambda v: v["status"] == "WAITING_FOR_APPROVAL" and v["state_version"] > view["state_version"])
    redrafted = b"Digest of outages in June, revision 2 (after review: say who was paged)"
    assert view["pending_approval"]["artifact_sha256"] == hashlib.sha256(redrafted).hexdigest()
    assert approve(sdk.client, sdk.approver, view).status_code == 200
    done = wait_for(sdk.client, sdk.owner, created["task_id"], status_is("SUCCEEDED", "FAILED"))
    assert done["status"] == "SUCCEEDED", done
    assert done["completed_step_ids"] == ["write", "review", "send"]
    mine = [p for p in publications(settings, engine) if p.metadata["task_id"] == created["task_id"]]
    assert [sorted(p.files) for p in mine] == [["digest.md"]]  # no files hook: the approved artifact itself
    assert mine[0].files["digest.md"] == hashlib.sha256(redrafted).hexdigest()


def test_a_goal_is_checked_against_the_types_goal_schema(sdk: Team) -> None:
    body = {"task_type": sdk.task_type, "request_intent_id": "g", "goal": {"topic": 3, "extra": True}}
    response = sdk.client.post("/tasks", json=body, headers=auth(sdk.owner))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unknown_field"
    assert [(p["path"], p["code"]) for p in error["details"]["problems"]] == [
        ("/goal", "unknown_field"), ("/goal/topic", "invalid_type")]
    assert [f["field"] for f in error["fields"]] == ["goal", "goal.topic"]
    unknown = sdk.client.post("/tasks", json={**body, "task_type": "no-such-type"}, headers=auth(sdk.owner))
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "invalid_value"
    assert sdk.task_type in unknown.json()["error"]["message"]  # names the types it knows


def test_a_running_task_keeps_the_definition_it_started_with(sdk: Team) -> None:
    old = _start(sdk, {"topic": "pinning"})
    waiting = _waiting(sdk, old["task_id"])
    assert waiting["status"] == "WAITING_FOR_APPROVAL", waiting
    rewrite(sdk.root, sdk.module, task_type=sdk.task_type, version="2", heading="Digest (v2) of")
    importlib.reload(importlib.import_module(sdk.module))
    try:
        current = registry.definition(sdk.task_type)
        assert current is not None and current.version == "2"
        new = _start(sdk, {"topic": "pinning"})
        assert approve(sdk.client, sdk.approver, waiting).status_code == 200
        done = wait_for(sdk.client, sdk.owner, old["task_id"], status_is("SUCCEEDED", "FAILED"))
        assert (done["status"], done["workflow_version"]) == ("SUCCEEDED", "1")
        assert done["completed_step_ids"] == ["write", "review", "send"]
        newer = _waiting(sdk, new["task_id"])
        assert (newer["workflow_version"], newer["completed_step_ids"]) == ("2", ["outline", "write"])
        assert newer["pending_approval"]["artifact_sha256"] == hashlib.sha256(
            b"Digest (v2) of pinning, revision 1").hexdigest()
    finally:
        rewrite(sdk.root, sdk.module, task_type=sdk.task_type, version="1", heading="Digest of")
        importlib.reload(importlib.import_module(sdk.module))


def test_thirty_tasks_publish_once_each(sdk: Team, settings: Settings, engine: Engine) -> None:
    """Half of them through a destination whose first send times out after storing (reconciled, never resent)."""
    started = [_start(sdk, {"topic": f"batch {n}"}, **({"destination": "reports-flaky"} if n % 2 else {}))
               for n in range(30)]
    for task in started:
        view = wait_for(sdk.client, sdk.owner, task["task_id"], status_is("WAITING_FOR_APPROVAL", "FAILED"), 120)
        assert approve(sdk.client, sdk.approver, view).status_code == 200, view
    for task in started:
        done = wait_for(sdk.client, sdk.owner, task["task_id"], status_is("SUCCEEDED", "FAILED"), 120)
        assert done["status"] == "SUCCEEDED", done
    ids = {task["task_id"] for task in started}
    stored = [p for name in ("reports", "reports-flaky") for p in publications(settings, engine, name)
              if p.metadata["task_id"] in ids]
    assert Counter(p.metadata["task_id"] for p in stored) == Counter({task_id: 1 for task_id in ids})
    assert len({p.publication_id for p in stored}) == 30


def test_the_readme_example_module_is_a_valid_task_type(tmp_path: Path) -> None:
    """The README's complete example, as written there, declares a type the API accepts."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    code = readme.split("# acme_tasks/digest.py\n", 1)[1].split("```", 1)[0]
    name = f"readme_example_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(code)
    sys.path.insert(0, str(tmp_path))
    try:
        registry.load([name])
    finally:
        sys.path.remove(str(tmp_path))
    parsed = registry.definition("incident-digest")
    assert parsed is not None and [s.kind for s in parsed.steps] == ["compute", "approval", "publish"]
    assert registry.hook("incident-digest", "review") is not None


MNEMO = str(Path(sys.executable).parent / "mnemo")


@pytest.mark.parametrize("command", ["api", "worker"])
def test_mnemo_refuses_to_start_with_a_task_module_it_cannot_use(
    settings: Settings, tmp_path: Path, command: str
) -> None:
    """``--tasks`` names what the process loads; a missing module, or one whose definition the API would refuse
    (an approval without a redraft step), stops it at start with the problem named, never a half-working server."""
    (tmp_path / "half_done.py").write_text(
        "from memory.tasks.sdk import TaskType\n"
        "BAD = TaskType('half-done', '1', {'type': 'object'})\n"
        "BAD.approval('review', artifact_from='nothing/draft.md')\n"
    )
    env = worker_env(settings, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                     MNEMO_API_PORT=str(free_port()))
    for modules, expected in (("no_such_team.tasks", "unknown_task_module"), ("half_done", "invalid_definition")):
        run = subprocess.run([MNEMO, command, "--tasks", modules], env=env, capture_output=True, text=True,
                             timeout=60, check=False)
        assert run.returncode != 0, run.stderr[-2000:]
        assert run.stderr.startswith(f"mnemo: {expected}: the task module {modules!r}"), run.stderr[-2000:]
        assert "Traceback" not in run.stderr
