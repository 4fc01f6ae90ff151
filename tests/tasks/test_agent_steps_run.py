"""A tenant's own task type, registered over REST and run to SUCCEEDED by an agent speaking only REST: the engine
opens the agent step, the agent claims, heartbeats and completes it, an approver rejects with a reason, the agent
redoes the step with that reason in its input, the approved artifact is published once.

The agent here is :class:`RestAgent`: plain HTTP calls with the owner's key, as any agent in any language makes them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from api.cli.task import task_app
from api.main import create_app
from api.settings import Settings
from memory.tasks.sdk import TaskType
from tests.conftest import MakeKey, auth
from tests.tasks.conftest import status_is, wait_for
from tests.workers import served

pytestmark = pytest.mark.usefixtures("task_worker")

REVIEWED: dict[str, Any] = {
    "version": "1",
    "goal_schema": {"type": "object", "required": ["service"], "additionalProperties": False,
                    "properties": {"service": {"type": "string"}}},
    "steps": [
        {"step_id": "collect", "kind": "agent", "description": "collect the week's incidents as Markdown"},
        {"step_id": "review", "kind": "approval", "artifact_from": "collect/digest.md"},
        {"step_id": "send", "kind": "publish", "destination": "archive"},
    ],
    "redraft_step": "collect",
}


@dataclass(frozen=True)
class RestAgent:
    """An agent outside mnemo: it knows the task id and its key, nothing else."""

    client: TestClient
    key: str
    task_id: str

    def call(self, path: str, body: dict[str, Any], expected: int = 200) -> dict[str, Any]:
        response = self.client.post(f"/tasks/{self.task_id}{path}", json=body, headers=auth(self.key))
        assert response.status_code == expected, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def claim(self, **body: Any) -> dict[str, Any]:
        return self.call("/attempts", body, 201)

    def complete(self, attempt_id: str, name: str, content: bytes, media_type: str = "text/markdown") -> Any:
        artifact = {"name": name, "media_type": media_type, "content_base64": base64.b64encode(content).decode()}
        return self.call(f"/attempts/{attempt_id}/complete", {"artifacts": [artifact], "output": {"lines": 2}})


@dataclass(frozen=True)
class Tenant:
    admin: str
    owner: str
    approver: str


@pytest.fixture()
def tenant(make_key: MakeKey) -> Tenant:
    name = f"t-{uuid.uuid4().hex[:12]}"
    return Tenant(make_key(tenant=name, user="root", roles=("admin",)),
                  make_key(tenant=name, user="alice", roles=("memory_writer",)),
                  make_key(tenant=name, user="bob", roles=("approver",)))


def register(client: TestClient, admin: str, task_type: str, body: dict[str, Any]) -> None:
    response = client.put(f"/task-definitions/{task_type}", json=body, headers=auth(admin))
    assert response.status_code in (200, 201), response.text


def start(client: TestClient, key: str, task_type: str, goal: dict[str, Any]) -> str:
    body = {"task_type": task_type, "request_intent_id": f"intent-{uuid.uuid4().hex[:8]}", "goal": goal}
    response = client.post("/tasks", json=body, headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["task_id"])


def waiting_for_agent(client: TestClient, key: str, task_id: str) -> dict[str, Any]:
    return wait_for(client, key, task_id, lambda v: v["waiting_reason"] == "AGENT" or v["status"] == "FAILED")


def agent_of_new_task(client: TestClient, tenant: Tenant, service: str = "checkout") -> RestAgent:
    """A new weekly-digest task of the owner's, once it waits for its agent, and the agent that will do it."""
    register(client, tenant.admin, "weekly-digest", REVIEWED)
    task_id = start(client, tenant.owner, "weekly-digest", {"service": service})
    waiting_for_agent(client, tenant.owner, task_id)
    return RestAgent(client, tenant.owner, task_id)


def decide(client: TestClient, key: str, view: dict[str, Any], decision: str, reason: str | None = None) -> None:
    body = {"decision": decision, "artifact_sha256": view["pending_approval"]["artifact_sha256"],
            "state_version": view["state_version"], **({"reason": reason} if reason else {})}
    response = client.post(f"/tasks/{view['task_id']}/approvals", json=body, headers=auth(key))
    assert response.status_code == 200, response.text


def test_a_rest_defined_task_is_run_to_success_by_an_agent(client: TestClient, tenant: Tenant) -> None:
    register(client, tenant.admin, "weekly-digest", REVIEWED)
    task_id = start(client, tenant.owner, "weekly-digest", {"service": "checkout"})
    view = waiting_for_agent(client, tenant.owner, task_id)
    assert (view["status"], view["current_step_id"], view["workflow_version"]) == \
        ("WAITING_FOR_EXTERNAL", "collect", "1")
    agent = RestAgent(client, tenant.owner, task_id)

    first = agent.claim(lease_seconds=60)
    assert first["step_id"] == "collect" and first["input"]["goal"] == {"service": "checkout"}
    assert "rejection_reason" not in first["input"]
    agent.call(f"/attempts/{first['attempt_id']}/heartbeat", {})
    draft = b"# checkout\n\n- INC-7: 502s\n"
    agent.complete(first["attempt_id"], "digest.md", draft)

    view = wait_for(client, tenant.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    assert view["pending_approval"]["artifact_sha256"] == hashlib.sha256(draft).hexdigest()
    decide(client, tenant.approver, view, "reject", "add the customer impact")

    view = waiting_for_agent(client, tenant.owner, task_id)
    again = agent.claim()
    assert again["input"]["rejection_reason"] == "add the customer impact"
    assert [(a["step_id"], a["name"]) for a in again["input"]["artifacts"]] == [("collect", "digest.md")]
    redrafted = draft + b"\nImpact: 3% of checkouts failed for 20 minutes.\n"
    agent.complete(again["attempt_id"], "digest.md", redrafted)

    view = wait_for(client, tenant.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    assert view["pending_approval"]["artifact_sha256"] == hashlib.sha256(redrafted).hexdigest()
    decide(client, tenant.approver, view, "approve")
    view = wait_for(client, tenant.owner, task_id, status_is("SUCCEEDED", "FAILED"))
    assert view["status"] == "SUCCEEDED", view
    assert view["completed_step_ids"] == ["collect", "review", "send"]

    [published] = client.get(f"/tasks/{task_id}/publications", headers=auth(tenant.owner)).json()["items"]
    assert (published["destination"], published["artifact_sha256"]) == \
        ("archive", hashlib.sha256(redrafted).hexdigest())
    assert client.get(published["url"], headers=auth(tenant.owner)).content == redrafted


def test_an_agent_giving_up_fails_the_task_with_its_reason(client: TestClient, tenant: Tenant) -> None:
    agent = agent_of_new_task(client, tenant, "search")
    task_id = agent.task_id
    claimed = agent.claim()
    agent.call(f"/attempts/{claimed['attempt_id']}/fail", {"reason": "the pager API refused my token",
                                                           "retryable": False})
    view = wait_for(client, tenant.owner, task_id, status_is("FAILED", "SUCCEEDED"))
    assert view["error"]["code"] == "agent_step_failed"
    assert "the pager API refused my token" in view["error"]["message"]


def test_a_retryable_failure_waits_for_the_next_claim(client: TestClient, tenant: Tenant) -> None:
    agent = agent_of_new_task(client, tenant, "search")
    task_id = agent.task_id
    first = agent.claim()
    agent.call(f"/attempts/{first['attempt_id']}/fail", {"reason": "rate limited", "retryable": True})
    second = agent.claim()
    assert second["attempt_number"] == first["attempt_number"] + 1
    agent.complete(second["attempt_id"], "digest.md", b"# search\n")
    view = wait_for(client, tenant.owner, task_id, status_is("WAITING_FOR_APPROVAL", "FAILED"))
    assert view["status"] == "WAITING_FOR_APPROVAL"


def test_a_running_task_keeps_its_version_when_the_definition_changes(client: TestClient, tenant: Tenant) -> None:
    """Version 1's task finishes on version 1 (three steps) after version 2 (a second agent step) is registered;
    a task started after that runs version 2."""
    register(client, tenant.admin, "weekly-digest", REVIEWED)
    old = start(client, tenant.owner, "weekly-digest", {"service": "checkout"})
    waiting_for_agent(client, tenant.owner, old)
    second = {**REVIEWED, "version": "2",
              "steps": [REVIEWED["steps"][0], {"step_id": "polish", "kind": "agent"}, *REVIEWED["steps"][1:]]}
    register(client, tenant.admin, "weekly-digest", second)

    RestAgent(client, tenant.owner, old).complete(RestAgent(client, tenant.owner, old).claim()["attempt_id"],
                                                  "digest.md", b"# v1\n")
    view = wait_for(client, tenant.owner, old, lambda v: v["status"] == "WAITING_FOR_APPROVAL"
                    or v["current_step_id"] != "collect")
    assert (view["status"], view["current_step_id"], view["workflow_version"]) == ("WAITING_FOR_APPROVAL", "review",
                                                                                   "1")
    decide(client, tenant.approver, view, "approve")
    assert wait_for(client, tenant.owner, old, status_is("SUCCEEDED", "FAILED"))["status"] == "SUCCEEDED"

    new = start(client, tenant.owner, "weekly-digest", {"service": "checkout"})
    agent = RestAgent(client, tenant.owner, new)
    waiting_for_agent(client, tenant.owner, new)
    agent.complete(agent.claim()["attempt_id"], "digest.md", b"# v2\n")
    view = wait_for(client, tenant.owner, new, lambda v: v["current_step_id"] == "polish" and
                    v["waiting_reason"] == "AGENT")
    assert view["workflow_version"] == "2"


def test_cancel_while_waiting_for_the_agent_ends_the_task(client: TestClient, tenant: Tenant) -> None:
    agent = agent_of_new_task(client, tenant)
    task_id = agent.task_id
    claimed = agent.claim()
    response = client.post(f"/tasks/{task_id}/cancel", json={}, headers=auth(tenant.owner))
    assert response.status_code == 200, response.text
    assert wait_for(client, tenant.owner, task_id, status_is("CANCELLED"))["status"] == "CANCELLED"
    late = {"artifacts": [{"name": "digest.md", "media_type": "text/markdown", "content_base64": "eA=="}]}
    refused = agent.call(f"/attempts/{claimed['attempt_id']}/complete", late, 409)
    assert refused["error"]["code"] == "task_closed"
    attempts = [e for e in client.get(f"/tasks/{task_id}/timeline", headers=auth(tenant.owner)).json()["entries"]
                if e["kind"] == "attempt"]
    assert [a["status"] for a in attempts] == ["ABANDONED"]  # no attempt left running on a closed task



def test_a_tenant_type_checks_its_goal_and_is_the_tenants_alone(
    client: TestClient, tenant: Tenant, make_key: MakeKey
) -> None:
    register(client, tenant.admin, "weekly-digest", REVIEWED)
    body = {"task_type": "weekly-digest", "request_intent_id": "bad-goal", "goal": {"service": 5, "team": "sre"}}
    refused = client.post("/tasks", json=body, headers=auth(tenant.owner))
    assert refused.status_code == 422, refused.text
    problems = {(p["path"], p["code"]) for p in refused.json()["error"]["details"]["problems"]}
    assert problems == {("/goal/service", "invalid_type"), ("/goal", "unknown_field")}  # the object names it
    stranger = make_key(roles=("memory_writer",))  # another tenant: the type is not there
    elsewhere = client.post("/tasks", json={**body, "goal": {"service": "checkout"}}, headers=auth(stranger))
    assert elsewhere.status_code == 422 and elsewhere.json()["error"]["code"] == "invalid_value", elsewhere.text
    assert "weekly-digest" not in elsewhere.json()["error"]["message"].split("types are:")[1]
    listed = client.get("/task-definitions", headers=auth(stranger)).json()["items"]
    assert "weekly-digest" not in [item["task_type"] for item in listed]


def test_the_cli_performs_an_agent_step(client: TestClient, settings: Settings, tenant: Tenant,
                                        tmp_path: Path) -> None:
    """``mnemo task attempt claim|complete`` over real HTTP: what a shell-script agent runs."""
    task_id = agent_of_new_task(client, tenant).task_id
    digest = tmp_path / "digest.md"
    digest.write_bytes(b"# checkout\n")
    with served(create_app(settings)) as port:
        def cli(*args: str) -> Result:
            return CliRunner().invoke(task_app, ["attempt", *args, "--api-url", f"http://127.0.0.1:{port}",
                                                 "--key", tenant.owner])

        claimed = cli("claim", task_id, "--lease", "60", "--json")
        assert claimed.exit_code == 0, claimed.output
        attempt = json.loads(claimed.output)["attempt_id"]
        wrong = cli("complete", task_id, attempt, "--artifact", "digest.md")
        assert wrong.exit_code == 1 and "say NAME=PATH" in wrong.output
        done = cli("complete", task_id, attempt, "--artifact", f"digest.md={digest}", "--output", '{"items": 1}')
        assert done.exit_code == 0, done.output
        assert done.output.startswith("step collect completed\ndigest.md sha256 ")
    view = wait_for(client, tenant.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    assert view["pending_approval"]["artifact_sha256"] == hashlib.sha256(b"# checkout\n").hexdigest()
    sha = hashlib.sha256(digest.read_bytes()).hexdigest()
    served_back = client.get(f"/tasks/{task_id}/artifacts/{sha}", headers=auth(tenant.owner))
    assert served_back.headers["content-type"].startswith("text/markdown")  # guessed from the file's name


def test_a_type_both_registered_and_declared_in_code_starts_neither(client: TestClient, tenant: Tenant) -> None:
    """A tenant registered it while a server without the module answered: no server silently picks one."""
    name = f"twin-{uuid.uuid4().hex[:6]}"
    register(client, tenant.admin, name, REVIEWED)
    twin = TaskType(name, "1", {"type": "object"}, redraft_step="collect")  # a module loaded here declares it too
    twin.agent("collect")
    twin.approval("review", artifact_from="collect/digest.md")
    twin.publish("send", destination="archive")
    body = {"task_type": name, "request_intent_id": "twin", "goal": {"service": "checkout"}}
    refused = client.post("/tasks", json=body, headers=auth(tenant.owner))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "task_type_ambiguous", refused.text


def test_after_a_redraft_a_claim_lists_each_artifact_once_the_latest(client: TestClient, tenant: Tenant) -> None:
    """The redraft re-runs collect, then render: render's next claim names collect's new incidents.json only."""
    two = {**REVIEWED, "steps": [{"step_id": "gather", "kind": "agent"}, *REVIEWED["steps"]], "redraft_step": "gather"}
    register(client, tenant.admin, "two-agents", two)
    task_id = start(client, tenant.owner, "two-agents", {"service": "checkout"})
    agent = RestAgent(client, tenant.owner, task_id)
    for content in (b"[1]", b"# v1\n"):
        waiting_for_agent(client, tenant.owner, task_id)
        claimed = agent.claim()
        name = "incidents.json" if claimed["step_id"] == "gather" else "digest.md"
        agent.complete(claimed["attempt_id"], name, content, "application/json" if name.endswith("json") else
                       "text/markdown")
        done: str = claimed["step_id"]
        wait_for(client, tenant.owner, task_id, lambda v: v["current_step_id"] != done)  # noqa: B023 (waited here)
    view = wait_for(client, tenant.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    decide(client, tenant.approver, view, "reject", "more incidents")
    waiting_for_agent(client, tenant.owner, task_id)
    gather = agent.claim()
    assert gather["step_id"] == "gather" and gather["input"]["rejection_reason"] == "more incidents"
    agent.complete(gather["attempt_id"], "incidents.json", b"[1, 2]", "application/json")
    wait_for(client, tenant.owner, task_id, lambda v: v["current_step_id"] == "collect" and
             v["waiting_reason"] == "AGENT")
    render = agent.claim()
    listed = [(a["step_id"], a["name"], a["sha256"]) for a in render["input"]["artifacts"]]
    assert listed == [("gather", "incidents.json", hashlib.sha256(b"[1, 2]").hexdigest()),
                      ("collect", "digest.md", hashlib.sha256(b"# v1\n").hexdigest())]


def test_an_agent_step_after_an_approval_runs_from_ready(client: TestClient, tenant: Tenant) -> None:
    """Approved, the task is READY; the next step is an agent's: it runs again first, then waits for the agent."""
    after = {**REVIEWED, "steps": [*REVIEWED["steps"][:2], {"step_id": "announce", "kind": "agent"},
                                   REVIEWED["steps"][2]]}
    register(client, tenant.admin, "announced", after)
    task_id = start(client, tenant.owner, "announced", {"service": "checkout"})
    agent = RestAgent(client, tenant.owner, task_id)
    waiting_for_agent(client, tenant.owner, task_id)
    agent.complete(agent.claim()["attempt_id"], "digest.md", b"# approved\n")
    decide(client, tenant.approver, wait_for(client, tenant.owner, task_id, status_is("WAITING_FOR_APPROVAL")),
           "approve")
    view = wait_for(client, tenant.owner, task_id, lambda v: (v["current_step_id"] == "announce" and
                    v["waiting_reason"] == "AGENT") or v["status"] == "FAILED")
    assert view["status"] == "WAITING_FOR_EXTERNAL", view
    agent.complete(agent.claim()["attempt_id"], "post.txt", b"announced", "text/plain")
    done = wait_for(client, tenant.owner, task_id, status_is("SUCCEEDED", "FAILED"))
    assert done["status"] == "SUCCEEDED" and done["completed_step_ids"] == ["collect", "review", "announce", "send"]
    [published] = client.get(f"/tasks/{task_id}/publications", headers=auth(tenant.owner)).json()["items"]
    assert published["artifact_sha256"] == hashlib.sha256(b"# approved\n").hexdigest()  # what was approved


def test_a_definition_whose_tasks_could_never_succeed_is_refused_at_put(client: TestClient, tenant: Tenant) -> None:
    never = {**REVIEWED, "steps": REVIEWED["steps"][:2]}  # approved, then never published
    refused = client.put("/task-definitions/never-published", json=never, headers=auth(tenant.admin))
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_definition", refused.text
    assert refused.json()["error"]["details"]["problems"][0]["path"] == "/steps/1"
