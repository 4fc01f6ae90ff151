"""Every role-gated endpoint beyond memory writes × every role, against a table written out here
(issue 12, deliver 3; memory writes are tests/test_role_matrix.py).

The callers are users of the tenant other than the objects' owner (alice), each with one role (or none).
A 403 must leave everything as it was; any other answer means the role let the caller through (a 409 from
a check that comes after the role check counts: the allowed callers are sent requests that change nothing
where the action would be destructive, e.g. approving a stale hash, resuming a job that needs no resume).
The table is literal, not read from the code, so a change of the rules fails here until it is decided.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from memory.db import tenant_session
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth, poll
from tests.factories import candidate
from tests.tasks.conftest import awaiting_approval
from tests.workers import api_with_worker

ROLES = ("", "memory_writer", "approver", "operator", "auditor", "knowledge_reviewer", "admin")
R = ("approver", "operator", "auditor", "admin")  # read any task of the tenant
SETTLED = {"completed", "blocked_by_retention", "failed_requires_action"}
DEFINITION = {"version": "1", "goal_schema": {"type": "object"}, "redraft_step": "write", "steps": [
    {"step_id": "write", "kind": "agent"}, {"step_id": "review", "kind": "approval", "artifact_from": "write/x.md"},
    {"step_id": "send", "kind": "publish", "destination": "archive"}]}

# endpoint -> the status each role gets (403 refused; 404 a task the caller may not see; else let through)
TABLE: dict[str, dict[str, int]] = {
    "GET /tasks?owner=all":                 {"": 403, "memory_writer": 403, **{r: 200 for r in R}},
    "GET /tasks/{id} (another's)":          {"": 404, "memory_writer": 404, **{r: 200 for r in R}},
    "GET /tasks/{id}/timeline (another's)": {"": 404, "memory_writer": 404, **{r: 200 for r in R}},
    "GET /tasks/{id}/publications (another's)": {"": 404, "memory_writer": 404, **{r: 200 for r in R}},
    "POST /tasks/{id}/approvals":           {"": 403, "memory_writer": 403, "approver": 409, "operator": 403,
                                             "auditor": 403, "admin": 409},
    "POST /tasks/{id}/pause":               {"": 404, "memory_writer": 404, "approver": 403, "operator": 409,
                                             "auditor": 403, "admin": 409},
    "POST /tasks/{id}/resume":              {"": 404, "memory_writer": 404, "approver": 403, "operator": 409,
                                             "auditor": 403, "admin": 409},
    "POST /tasks/{id}/cancel":              {"": 404, "memory_writer": 404, "approver": 403, "operator": 200,
                                             "auditor": 403, "admin": 200},
    # Performing another user's task's step: readers of every task see it (403), anyone else a missing task (404).
    "POST /tasks/{id}/attempts (another's)": {"": 404, "memory_writer": 404, **{r: 403 for r in R}},
    "POST /tasks/{id}/attempts/{a}/heartbeat (another's)": {"": 404, "memory_writer": 404, **{r: 403 for r in R}},
    "POST /tasks/{id}/attempts/{a}/complete (another's)": {"": 404, "memory_writer": 404, **{r: 403 for r in R}},
    "POST /tasks/{id}/attempts/{a}/fail (another's)": {"": 404, "memory_writer": 404, **{r: 403 for r in R}},
    "POST /tasks/{id}/operations/{op}/resolve": {"": 403, "memory_writer": 403, "approver": 403, "operator": 409,
                                                 "auditor": 403, "admin": 409},
    "POST /report-data/sample":             {"": 403, "memory_writer": 403, "approver": 403, "operator": 200,
                                             "auditor": 403, "admin": 200},
    "POST /memory-deletions/{id}/resume":   {"": 403, "memory_writer": 403, "approver": 403, "operator": 409,
                                             "auditor": 403, "admin": 409},
    "POST /retention-holds":                {**{r: 403 for r in ROLES}, "admin": 201},
    "POST /retention-holds/{id}/release":   {**{r: 403 for r in ROLES}, "admin": 200},
    "GET /recall/audit":                    {"": 403, "memory_writer": 403, "approver": 403, "operator": 200,
                                             "auditor": 200, "admin": 200},
    "PUT /tenant-policy":                   {**{r: 403 for r in ROLES}, "admin": 200},
    "POST /deletion-requests (another user's subject)": {**{r: 403 for r in ROLES}, "admin": 202},
    "PUT /policies/{agent}/{resource}":     {**{r: 403 for r in ROLES}, "admin": 200},
    "DELETE /policies/{agent}/{resource} (none set)": {**{r: 403 for r in ROLES}, "admin": 404},
    "GET /policies/{agent}":                {**{r: 403 for r in ROLES}, "auditor": 200, "admin": 200},
    "POST /runs":                           {**{r: 403 for r in ROLES}, "admin": 201},
    "POST /runs/{id}/end (none such)":      {**{r: 403 for r in ROLES}, "admin": 404},
    "PUT /publish-destinations/{name}":     {**{r: 403 for r in ROLES}, "admin": 201},
    "GET /publish-destinations":            {r: 200 for r in ROLES},
    "DELETE /publish-destinations/{name} (none such)": {**{r: 403 for r in ROLES}, "admin": 404},
    "PUT /task-definitions/{type}":         {**{r: 403 for r in ROLES}, "admin": 201},
    "GET /task-definitions":                {r: 200 for r in ROLES},
    "GET /task-definitions/{type}":         {r: 200 for r in ROLES},
    # Any key of the tenant owns schedules; another's is the owner's and an admin's alone (else a missing one).
    "PUT /task-schedules/{name}":           {r: 201 for r in ROLES},
    "GET /task-schedules":                  {r: 200 for r in ROLES},
    "GET /task-schedules?owner=all":        {**{r: 403 for r in ROLES}, "admin": 200},
    "GET /task-schedules/{name} (another's)": {**{r: 404 for r in ROLES}, "admin": 200},
    "POST /task-schedules/{name}/pause (another's)": {**{r: 404 for r in ROLES}, "admin": 200},
    "POST /task-schedules/{name}/unpause (another's)": {**{r: 404 for r in ROLES}, "admin": 200},
    "DELETE /task-schedules/{name} (another's)": {**{r: 404 for r in ROLES}, "admin": 204},
    # The tenant's skills are an admin's to push, and so is another agent's overlay; every key reads them.
    "POST /skills (TENANT)":                {**{r: 403 for r in ROLES}, "admin": 201},
    "POST /skills (AGENT, naming an agent)": {**{r: 403 for r in ROLES}, "admin": 201},
    "GET /skills":                          {r: 200 for r in ROLES},
    "GET /skills/{name}":                   {r: 200 for r in ROLES},
    "GET /skills/{name}/versions":          {r: 200 for r in ROLES},
    # Anyone proposes knowledge and reads what is published; a knowledge reviewer (or admin) reads and decides
    # every candidate, anyone else sees their own only; only its author revises one.
    "POST /knowledge-candidates":           {r: 201 for r in ROLES},
    "GET /knowledge-candidates":            {r: 200 for r in ROLES},
    "GET /knowledge-candidates/{id} (another's)": {**{r: 404 for r in ROLES}, "knowledge_reviewer": 200, "admin": 200},
    "PUT /knowledge-candidates/{id} (another's)": {r: 404 for r in ROLES},
    "POST /knowledge-candidates/{id}/reviews": {**{r: 403 for r in ROLES}, "knowledge_reviewer": 409, "admin": 409},
    "GET /knowledge":                       {r: 200 for r in ROLES},
    "GET /knowledge/{id} (none such)":      {r: 404 for r in ROLES},
}
for _row in TABLE.values():  # knowledge_reviewer holds nothing beyond knowledge: elsewhere it is a key with no role
    _row.setdefault("knowledge_reviewer", _row[""])


def skill(space: str) -> dict[str, Any]:
    """An overlay of the SYSTEM monthly-report skill, new each time (so a push let through is a new version)."""
    text = f"---\nname: monthly-report\nversion: '{uuid.uuid4().hex[:6]}'\n---\n## Strategy\nBe brief.\n"
    return {"space": space, "files": {"SKILL.md": text}}


SCHEDULE = {"task_type": "monthly-report", "goal": {"month": "{{fire.previous_month}}", "currency": "CNY"},
            "cron": "0 9 1 1 *", "timezone": "UTC"}


@dataclass
class Tenant:
    tenant: str
    alice: str
    keys: dict[str, str]
    task: dict[str, Any]
    job_id: str
    candidate: dict[str, Any]


@pytest.fixture(scope="module")
def api(settings: Any, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "role-table") as client:
        yield client


@pytest.fixture(scope="module")
def tenant(api: TestClient, make_key: MakeKey, engine: Engine) -> Tenant:
    name = f"t-{uuid.uuid4().hex[:12]}"
    alice = make_key(tenant=name, user="alice", roles=("memory_writer",))
    make_key(tenant=name, user="dave")  # the user whose data an admin deletes (a user nobody knows is a 404)
    with tenant_session(engine, name) as session:
        seed_sales(session, name, total=2_400)
    memory = api.post("/memory-candidates", json=candidate("alice's note"), headers=auth(alice)).json()["memory_id"]
    job = api.delete(f"/memories/{memory}", headers=auth(alice))
    assert job.status_code == 202, job.text
    # Settled before the table runs: each row compares the database before and after a call, and a deletion still
    # completing in the background changed it between them (seen once in a full run, under POST /tasks/{id}/resume).
    poll(api, alice, f"/memory-deletions/{job.json()['job_id']}", lambda body: body["status"] == "completed", 90)
    keys = {role: make_key(tenant=name, user=f"user-{role or 'none'}", roles=(role,) if role else ()) for role in ROLES}
    proposed = api.post("/knowledge-candidates", json=knowledge("alice's claim"), headers=auth(alice))
    assert proposed.status_code == 201, proposed.text
    shown = api.get(f"/knowledge-candidates/{proposed.json()['candidate_id']}", headers=auth(alice)).json()
    return Tenant(name, alice, keys, awaiting_approval(api, alice), job.json()["job_id"], shown)


def knowledge(claim: str) -> dict[str, Any]:
    return {"key": "matrix.claim", "claim": claim, "authority": "P1", "source_refs": ["doc:matrix"]}


def _snapshot(engine: Engine, tenant: str) -> dict[str, Any]:
    """What any of these endpoints could change, read straight from the database."""
    queries = {
        "tasks": "SELECT task_id, status, state_version FROM tasks ORDER BY task_id",
        "holds": "SELECT hold_id, released_at FROM retention_holds ORDER BY hold_id",
        "jobs": "SELECT job_id, status FROM deletion_jobs ORDER BY job_id",
        "policy": "SELECT separation_of_duties, updated_at FROM tenant_policies",
        "sales": "SELECT count(*) FROM sales_order_lines",
        "agent_policies": "SELECT agent_id, resource, operations, fields FROM resource_policies ORDER BY 1, 2",
        "runs": "SELECT run_id, ended_at FROM resource_runs ORDER BY run_id",
        "destinations": "SELECT name, kind, url FROM publish_destinations ORDER BY name",
        "task_definitions": "SELECT task_type, version, body_sha256 FROM task_definitions ORDER BY 1, 2",
        "task_schedules": "SELECT name, owner_user_id, paused, updated_at FROM task_schedules ORDER BY name",
        "skills": "SELECT space, agent_id, name, version FROM skill_versions ORDER BY 1, 2, 3, 4",
        "knowledge_candidates": "SELECT candidate_id, status, state_version FROM knowledge_candidates ORDER BY 1",
        "knowledge_items": "SELECT knowledge_id, version, status FROM knowledge_items ORDER BY 1, 2",
    }
    with tenant_session(engine, tenant) as session:
        return {name: [tuple(row) for row in session.execute(text(sql)).all()] for name, sql in queries.items()}


Call = Callable[[TestClient, Tenant, str], Any]


def _calls(t: Tenant, state: dict[str, str]) -> dict[str, Call]:
    task = t.task
    stale = {"decision": "approve", "artifact_sha256": "0" * 64, "state_version": task["state_version"]}

    def hold(api: TestClient, t: Tenant, key: str) -> Any:
        return api.post(f"/retention-holds/{state['hold_id']}/release", headers=auth(key))

    def cancel(api: TestClient, t: Tenant, key: str) -> Any:
        return api.post(f"/tasks/{state['cancel_task_id']}/cancel", headers=auth(key))

    return {
        "GET /tasks?owner=all": lambda api, t, key: api.get("/tasks?owner=all", headers=auth(key)),
        "GET /tasks/{id} (another's)": lambda api, t, key: api.get(f"/tasks/{task['task_id']}", headers=auth(key)),
        "GET /tasks/{id}/timeline (another's)":
            lambda api, t, key: api.get(f"/tasks/{task['task_id']}/timeline", headers=auth(key)),
        "GET /tasks/{id}/publications (another's)":
            lambda api, t, key: api.get(f"/tasks/{task['task_id']}/publications", headers=auth(key)),
        "POST /tasks/{id}/approvals":
            lambda api, t, key: api.post(f"/tasks/{task['task_id']}/approvals", json=stale, headers=auth(key)),
        "POST /tasks/{id}/pause": lambda api, t, key: api.post(f"/tasks/{task['task_id']}/pause", headers=auth(key)),
        "POST /tasks/{id}/resume": lambda api, t, key: api.post(f"/tasks/{task['task_id']}/resume", headers=auth(key)),
        "POST /tasks/{id}/cancel": cancel,
        "POST /tasks/{id}/attempts (another's)":
            lambda api, t, key: api.post(f"/tasks/{task['task_id']}/attempts", json={}, headers=auth(key)),
        "POST /tasks/{id}/attempts/{a}/heartbeat (another's)": lambda api, t, key: api.post(
            f"/tasks/{task['task_id']}/attempts/{uuid.uuid4()}/heartbeat", headers=auth(key)),
        "POST /tasks/{id}/attempts/{a}/complete (another's)": lambda api, t, key: api.post(
            f"/tasks/{task['task_id']}/attempts/{uuid.uuid4()}/complete", json={"artifacts": []}, headers=auth(key)),
        "POST /tasks/{id}/attempts/{a}/fail (another's)": lambda api, t, key: api.post(
            f"/tasks/{task['task_id']}/attempts/{uuid.uuid4()}/fail", json={"reason": "r", "retryable": True},
            headers=auth(key)),
        "POST /tasks/{id}/operations/{op}/resolve": lambda api, t, key: api.post(
            f"/tasks/{task['task_id']}/operations/{uuid.uuid4()}/resolve", json={"outcome": "published", "note": "n"},
            headers=auth(key)),
        "POST /report-data/sample": lambda api, t, key: api.post("/report-data/sample", json={"lines": 2_400},
                                                                  headers=auth(key)),
        "POST /memory-deletions/{id}/resume":
            lambda api, t, key: api.post(f"/memory-deletions/{t.job_id}/resume", headers=auth(key)),
        "POST /retention-holds": lambda api, t, key: api.post(
            "/retention-holds", json={"user_id": "carol", "reason": "litigation"}, headers=auth(key)),
        "POST /retention-holds/{id}/release": hold,
        "GET /recall/audit": lambda api, t, key: api.get("/recall/audit", headers=auth(key)),
        "PUT /tenant-policy": lambda api, t, key: api.put("/tenant-policy", json={"separation_of_duties": True},
                                                          headers=auth(key)),
        "POST /deletion-requests (another user's subject)": lambda api, t, key: api.post(
            "/deletion-requests",
            json={"deletion_request_id": uuid.uuid4().hex, "scope": {"type": "subject", "user_id": "dave"}},
            headers=auth(key)),
        "PUT /policies/{agent}/{resource}": lambda api, t, key: api.put(
            "/policies/planner/todo", json={"operations": ["read"], "fields": ["/title"]}, headers=auth(key)),
        "DELETE /policies/{agent}/{resource} (none set)":
            lambda api, t, key: api.delete("/policies/nobody/todo", headers=auth(key)),
        "GET /policies/{agent}": lambda api, t, key: api.get("/policies/planner", headers=auth(key)),
        "POST /runs": lambda api, t, key: api.post("/runs", json={"thread_id": "th-1", "agent_id": "planner"},
                                                   headers=auth(key)),
        "POST /runs/{id}/end (none such)": lambda api, t, key: api.post(f"/runs/{uuid.uuid4()}/end", headers=auth(key)),
        "PUT /publish-destinations/{name}": lambda api, t, key: api.put(
            "/publish-destinations/board", json={"kind": "archive"}, headers=auth(key)),
        "GET /publish-destinations": lambda api, t, key: api.get("/publish-destinations", headers=auth(key)),
        "DELETE /publish-destinations/{name} (none such)":
            lambda api, t, key: api.delete("/publish-destinations/nowhere", headers=auth(key)),
        "PUT /task-definitions/{type}": lambda api, t, key: api.put("/task-definitions/digest", json=DEFINITION,
                                                                    headers=auth(key)),
        "GET /task-definitions": lambda api, t, key: api.get("/task-definitions", headers=auth(key)),
        "GET /task-definitions/{type}":
            lambda api, t, key: api.get("/task-definitions/monthly-report", headers=auth(key)),
        "PUT /task-schedules/{name}": lambda api, t, key: api.put(
            f"/task-schedules/s-{uuid.uuid4().hex[:8]}", json=SCHEDULE, headers=auth(key)),
        "GET /task-schedules": lambda api, t, key: api.get("/task-schedules", headers=auth(key)),
        "GET /task-schedules?owner=all": lambda api, t, key: api.get("/task-schedules?owner=all", headers=auth(key)),
        "GET /task-schedules/{name} (another's)":
            lambda api, t, key: api.get(f"/task-schedules/{state['schedule']}", headers=auth(key)),
        "POST /task-schedules/{name}/pause (another's)":
            lambda api, t, key: api.post(f"/task-schedules/{state['schedule']}/pause", headers=auth(key)),
        "POST /task-schedules/{name}/unpause (another's)":
            lambda api, t, key: api.post(f"/task-schedules/{state['schedule']}/unpause", headers=auth(key)),
        "DELETE /task-schedules/{name} (another's)":
            lambda api, t, key: api.delete(f"/task-schedules/{state['schedule']}", headers=auth(key)),
        "POST /skills (TENANT)": lambda api, t, key: api.post("/skills", json=skill("TENANT"), headers=auth(key)),
        "POST /skills (AGENT, naming an agent)": lambda api, t, key: api.post(
            "/skills", params={"agent": "planner"}, json=skill("AGENT"), headers=auth(key)),
        "GET /skills": lambda api, t, key: api.get("/skills", headers=auth(key)),
        "GET /skills/{name}": lambda api, t, key: api.get("/skills/monthly-report", headers=auth(key)),
        "GET /skills/{name}/versions":
            lambda api, t, key: api.get("/skills/monthly-report/versions", headers=auth(key)),
        "POST /knowledge-candidates": lambda api, t, key: api.post(
            "/knowledge-candidates", json=knowledge(f"claim {uuid.uuid4().hex[:8]}"), headers=auth(key)),
        "GET /knowledge-candidates": lambda api, t, key: api.get("/knowledge-candidates", headers=auth(key)),
        "GET /knowledge-candidates/{id} (another's)": lambda api, t, key: api.get(
            f"/knowledge-candidates/{t.candidate['candidate_id']}", headers=auth(key)),
        "PUT /knowledge-candidates/{id} (another's)": lambda api, t, key: api.put(
            f"/knowledge-candidates/{t.candidate['candidate_id']}", json={**knowledge("revised"), "version": 1},
            headers=auth(key)),
        "POST /knowledge-candidates/{id}/reviews": lambda api, t, key: api.post(
            f"/knowledge-candidates/{t.candidate['candidate_id']}/reviews",
            json={"decision": "approve", "content_sha256": "0" * 64, "state_version": t.candidate["state_version"]},
            headers=auth(key)),
        "GET /knowledge": lambda api, t, key: api.get("/knowledge", headers=auth(key)),
        "GET /knowledge/{id} (none such)": lambda api, t, key: api.get(f"/knowledge/{uuid.uuid4()}", headers=auth(key)),
    }


@pytest.mark.parametrize("endpoint", list(TABLE))
def test_route_role_table(api: TestClient, tenant: Tenant, engine: Engine, endpoint: str) -> None:
    state: dict[str, str] = {}
    call = _calls(tenant, state)[endpoint]
    if endpoint.endswith("(another's)") and "/task-schedules/" in endpoint:  # a schedule of alice's
        state["schedule"] = f"alice-{uuid.uuid4().hex[:8]}"
        put = api.put(f"/task-schedules/{state['schedule']}", json=SCHEDULE, headers=auth(tenant.alice))
        assert put.status_code == 201, put.text
    # The refused first, then the let-through (whose answers may change something): a 403 must change nothing.
    for role in sorted(ROLES, key=lambda r: TABLE[endpoint][r] != 403):
        expected = TABLE[endpoint][role]
        if endpoint == "POST /retention-holds/{id}/release":  # a hold to release, put by an admin
            hold = api.post("/retention-holds", json={"user_id": "carol", "reason": "audit"},
                            headers=auth(tenant.keys["admin"]))
            state["hold_id"] = hold.json()["hold_id"]
        if endpoint == "POST /tasks/{id}/cancel":  # cancelling works: each caller let through cancels a task of its own
            refused = expected in (403, 404)
            own = tenant.task if refused else awaiting_approval(api, tenant.alice)
            state["cancel_task_id"] = own["task_id"]
        before = _snapshot(engine, tenant.tenant) if expected == 403 else None
        response = call(api, tenant, tenant.keys[role])
        assert response.status_code == expected, (endpoint, role or "no role", response.text[:300])
        if expected == 403:
            assert response.json()["error"]["code"] == "forbidden", response.text
            assert _snapshot(engine, tenant.tenant) == before, (endpoint, role)
        elif response.status_code == 202:  # a deletion job let through runs on: settle it, or the next row sees it move
            poll(api, tenant.keys["admin"], f"/memory-deletions/{response.json()['job_id']}",
                 lambda job: job["status"] in SETTLED, timeout=60)
