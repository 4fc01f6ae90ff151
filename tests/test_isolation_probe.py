"""A generated probe of every route with an id in its path (issue 12, deliver 3): another tenant's object,
and another user's private object, answer exactly as a random id does.

For each route a factory makes a real object of its kind as user alice of tenant A (a memory, a deletion
job, a retention hold, a task, its artifact and its operation). Then the route is called with the real ids
and with random ids by (a) alice of tenant B, holding every role (so no role check answers before the
lookup), and (b) bob of tenant A, holding none. The two answers must be identical, status and body (the
ids and the request id aside), and the status the one written in :data:`EXPECTED`: a 404, or the 403 of a
role check that comes before any lookup. The route list comes from the app itself: a new route with a
path id that is not in :data:`ROUTES` fails :func:`test_every_route_with_a_path_id_is_probed`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth, poll
from tests.factories import candidate
from tests.tasks.conftest import awaiting_approval
from tests.workers import api_with_worker

EVERY_ROLE = ("admin", "memory_writer", "approver", "operator", "auditor")


@dataclass(frozen=True)
class World:
    """Tenant A's objects (ids by path parameter) and the keys of the three users."""

    ids: dict[str, dict[str, str]]
    alice: str
    admin: str
    runtime: str
    stranger: str
    colleague: str


# route -> (kind of object whose ids fill the path, body sent)
ROUTES: dict[tuple[str, str], tuple[str, dict[str, Any] | None]] = {
    ("POST", "/memory-candidates/{memory_id}/confirm"): ("memory", None),
    ("GET", "/memories/{memory_id}"): ("memory", None),
    ("PATCH", "/memories/{memory_id}"): ("memory", {"expected_version": 1, "content": "rewritten"}),
    ("DELETE", "/memories/{memory_id}"): ("memory", None),
    ("POST", "/memories/{memory_id}/expire"): ("memory", None),
    ("POST", "/memories/{memory_id}/promotions"): ("memory", {"target": "knowledge"}),
    ("GET", "/memory-deletions/{job_id}"): ("deletion_job", None),
    ("POST", "/memory-deletions/{job_id}/resume"): ("deletion_job", None),
    ("POST", "/retention-holds/{hold_id}/release"): ("hold", None),
    ("GET", "/tasks/{task_id}"): ("task", None),
    ("POST", "/tasks/{task_id}/approvals"): ("task", "approval"),  # type: ignore[dict-item]
    ("POST", "/tasks/{task_id}/pause"): ("task", None),
    ("POST", "/tasks/{task_id}/resume"): ("task", None),
    ("POST", "/tasks/{task_id}/cancel"): ("task", None),
    ("POST", "/tasks/{task_id}/operations/{operation_id}/resolve"): (
        "operation",
        {"outcome": "published", "note": "n"},
    ),
    ("GET", "/tasks/{task_id}/artifacts/{sha256}"): ("artifact", None),
    ("GET", "/tasks/{task_id}/timeline"): ("task", None),
    ("GET", "/tasks/{task_id}/publications"): ("task", None),
    ("GET", "/publish-destinations/{name}"): ("destination", None),
    ("DELETE", "/publish-destinations/{name}"): ("destination", None),
    # Named by the caller like a policy: a stranger's valid PUT would write its own tenant's, so the probe sends
    # one the rules refuse (a webhook without its url and secret).
    ("PUT", "/publish-destinations/{name}"): ("destination", {"kind": "webhook"}),
    ("POST", "/tasks/{task_id}/attempts"): ("task", None),
    # A real attempt id of alice's task (a worker's: an agent's would be refused the same way, by its task first).
    ("POST", "/tasks/{task_id}/attempts/{attempt_id}/heartbeat"): ("attempt", None),
    ("POST", "/tasks/{task_id}/attempts/{attempt_id}/complete"): ("attempt", {"artifacts": []}),
    ("POST", "/tasks/{task_id}/attempts/{attempt_id}/fail"): ("attempt", {"reason": "probe", "retryable": True}),
    ("GET", "/sessions/{session_id}"): ("session", None),
    ("POST", "/sessions/{session_id}/messages"): ("session", {"messages": [
        {"idempotency_key": "probe-message", "role": "user", "content": "probe", "created_at": "2026-07-14T14:00:00Z"},
    ]}),
    ("GET", "/sessions/{session_id}/window"): ("session", None),
    ("GET", "/sessions/{session_id}/summaries/latest"): ("session", None),
    ("POST", "/sessions/{session_id}/commit"): ("session", {"commit_id": "probe-commit"}),
    ("GET", "/sessions/{session_id}/commits/{commit_id}"): ("commit", None),
    ("GET", "/records/{resource}/{record_id}"): ("record", None),
    ("DELETE", "/records/{resource}/{record_id}"): ("record", None),
    ("PUT", "/records/{resource}/{record_id}"): ("record", {"data": {"title": "probe", "status": "done"},
                                                          "expected_version": 1}),
    # A listing of alice's type: to anyone else it is their own (empty) list, the same for any record id.
    ("GET", "/resources/{resource}"): ("record", None),
    ("GET", "/runs/{run_id}"): ("run", None),
    ("POST", "/runs/{run_id}/end"): ("run", None),
    ("GET", "/policies/{agent_id}"): ("policy", None),
    ("GET", "/policies/{agent_id}/{resource}"): ("policy", None),
    ("DELETE", "/policies/{agent_id}/{resource}"): ("policy", None),
    # A policy is named by its agent, not an object of tenant A: a stranger's valid PUT would write its own
    # tenant's, so the probe sends one the declaration refuses (nothing is written in either tenant).
    ("PUT", "/policies/{agent_id}/{resource}"): ("policy", {"operations": ["read"], "fields": ["/status"]}),
    ("GET", "/task-definitions/{task_type}"): ("definition", None),
    # Like a policy, a type is named, not made: a stranger's valid PUT would register its own tenant's, so the
    # probe sends a body the parser refuses (nothing is written in either tenant).
    ("PUT", "/task-definitions/{task_type}"): ("definition", {"version": "1"}),
    ("GET", "/task-schedules/{name}"): ("schedule", None),
    ("DELETE", "/task-schedules/{name}"): ("schedule", None),
    ("POST", "/task-schedules/{name}/pause"): ("schedule", None),
    ("POST", "/task-schedules/{name}/unpause"): ("schedule", None),
    # Named by the caller: a valid PUT would put the caller's own, so the probe sends a body the parser refuses.
    ("PUT", "/task-schedules/{name}"): ("schedule", {"cron": "0 9 1 1 *"}),
    ("GET", "/skills/{name}"): ("skill", None),
    ("GET", "/skills/{name}/versions"): ("skill", None),
    ("GET", "/knowledge-candidates/{candidate_id}"): ("candidate", None),
    # A valid revision: only the author's own candidate is found (alice's candidate does not wait for one anyway).
    ("PUT", "/knowledge-candidates/{candidate_id}"): ("candidate", {"version": 1, "claim": "probe", "authority": "P1",
                                                                    "source_refs": ["doc:probe"]}),
    ("POST", "/knowledge-candidates/{candidate_id}/reviews"): ("candidate", "review"),  # type: ignore[dict-item]
    ("GET", "/knowledge/{knowledge_id}"): ("knowledge", None),
}

ROLE_FIRST = {
    # Role checks that come before the object is looked up: a roleless caller hears them for any id.
    ("POST", "/memory-deletions/{job_id}/resume"),
    ("POST", "/retention-holds/{hold_id}/release"),
    ("POST", "/tasks/{task_id}/approvals"),
    ("POST", "/tasks/{task_id}/operations/{operation_id}/resolve"),
    ("POST", "/runs/{run_id}/end"),
    ("GET", "/policies/{agent_id}"),
    ("GET", "/policies/{agent_id}/{resource}"),
    ("DELETE", "/policies/{agent_id}/{resource}"),
    ("PUT", "/policies/{agent_id}/{resource}"),
    ("DELETE", "/publish-destinations/{name}"),
    ("PUT", "/publish-destinations/{name}"),
    ("PUT", "/task-definitions/{task_type}"),
    ("POST", "/knowledge-candidates/{candidate_id}/reviews"),
}
NOT_404 = {
    # What a stranger's own tenant answers for an agent it has no policy for, real name or random alike.
    ("GET", "/policies/{agent_id}"): 200,
    ("PUT", "/policies/{agent_id}/{resource}"): 422,
    ("PUT", "/publish-destinations/{name}"): 422,
    ("PUT", "/task-definitions/{task_type}"): 422,
    ("PUT", "/task-schedules/{name}"): 422,
}
BODY_FIRST = {("PUT", "/task-schedules/{name}")}
"""A body refused before any lookup or role check: every caller hears the same 422, real name or random."""
LISTINGS = {("GET", "/resources/{resource}")}
"""Paths that name a type, not an object: answered 200, with none of alice's records in them (checked below)."""
TENANT_WIDE = {("GET", "/publish-destinations/{name}"), ("GET", "/task-definitions/{task_type}"),
               ("GET", "/skills/{name}"), ("GET", "/skills/{name}/versions"), ("GET", "/knowledge/{knowledge_id}")}
"""What every key of the tenant reads (a destination, a task type, a skill, published knowledge): a colleague
sees the real one (a random name is still a 404); another tenant's is a missing one."""
EXPECTED = {
    "stranger": {route: 200 if route in LISTINGS else NOT_404.get(route, 404) for route in ROUTES},
    "colleague": {route: 200 if route in LISTINGS | TENANT_WIDE else 403 if route in ROLE_FIRST
                  else 422 if route in BODY_FIRST else 404 for route in ROUTES},
}


def _path_routes() -> set[tuple[str, str]]:
    """From the OpenAPI, which lists every operation (this FastAPI nests included routers in app.routes);
    no route of the app is hidden from the schema."""
    app = create_app(Settings(database_url="postgresql+psycopg://unused@127.0.0.1:1/unused"))
    return {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        if "{" in path
        for method in operations
    }


def test_every_route_with_a_path_id_is_probed() -> None:
    assert _path_routes() == set(ROUTES), "add the new route (and a factory for its object) to ROUTES"


@pytest.fixture(scope="module")
def api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    """The API with a worker on a queue of its own, so tasks reach an approval and publish."""
    with api_with_worker(settings, engine, "isolation") as client:
        yield client


@pytest.fixture(scope="module")
def world(api: TestClient, make_key: MakeKey, engine: Engine) -> World:
    tenant_a, tenant_b = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    alice = make_key(tenant=tenant_a, user="alice", roles=("memory_writer",))
    admin = make_key(tenant=tenant_a, user="root", roles=("admin",))
    runtime = make_key(tenant=tenant_a, user="alice", roles=("agent_runtime",))
    approver = make_key(tenant=tenant_a, user="amy", roles=("approver",))
    with tenant_session(engine, tenant_a) as session:
        seed_sales(session, tenant_a, total=2_400)
    # A model's inference stays a CANDIDATE, so confirm has something to confirm.
    memory = api.post("/memory-candidates", json=candidate("alice's note", source_level="E4"), headers=auth(alice))
    assert memory.status_code == 201, memory.text
    doomed = api.post("/memory-candidates", json=candidate("to be forgotten"), headers=auth(alice)).json()["memory_id"]
    job = api.delete(f"/memories/{doomed}", headers=auth(alice))
    assert job.status_code == 202, job.text
    hold = api.post("/retention-holds", json={"user_id": "carol", "reason": "litigation"}, headers=auth(admin))
    assert hold.status_code == 201, hold.text
    waiting = awaiting_approval(api, alice)
    published = awaiting_approval(api, alice)
    decision = {"decision": "approve", "artifact_sha256": published["pending_approval"]["artifact_sha256"],
                "state_version": published["state_version"]}
    approved = api.post(f"/tasks/{published['task_id']}/approvals", json=decision, headers=auth(approver))
    assert approved.status_code == 200
    done = poll(api, alice, f"/tasks/{published['task_id']}", lambda v: v["status"] == "SUCCEEDED", 60)
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    assert api.post("/sessions", json={"session_id": session_id}, headers=auth(alice)).status_code == 201
    said = {"idempotency_key": f"{session_id}-1", "role": "user", "content": "我住在上海。",
            "created_at": "2026-07-14T14:00:00Z"}
    posted = api.post(f"/sessions/{session_id}/messages", json={"messages": [said]}, headers=auth(alice))
    assert posted.status_code == 201
    assert api.post(f"/sessions/{session_id}/commit", json={"commit_id": "c-1"}, headers=auth(alice)).status_code == 202
    poll(api, alice, f"/sessions/{session_id}/commits/c-1", lambda v: v["status"] == "completed", 60)
    record_id = f"r-{uuid.uuid4().hex[:8]}"
    record = api.put(f"/records/todo/{record_id}", json={"data": {"title": "alice's", "status": "open"}},
                     headers=auth(alice))
    assert record.status_code == 201, record.text
    policy = api.put("/policies/planner/todo", json={"operations": ["read"], "fields": ["/title"]}, headers=auth(admin))
    assert policy.status_code == 200, policy.text
    entries = api.get(f"/tasks/{waiting['task_id']}/timeline", headers=auth(alice)).json()["entries"]
    attempt_id = next(entry["id"] for entry in entries if entry["kind"] == "attempt")
    run = api.post("/runs", json={"thread_id": "th-1", "agent_id": "planner"}, headers=auth(runtime))
    assert run.status_code == 201, run.text
    board = api.put("/publish-destinations/board", json={"kind": "archive"}, headers=auth(admin))
    assert board.status_code == 201, board.text
    definition = {"version": "1", "goal_schema": {"type": "object"}, "redraft_step": "write", "steps": [
        {"step_id": "write", "kind": "agent"}, {"step_id": "review", "kind": "approval", "artifact_from": "write/x.md"},
        {"step_id": "send", "kind": "publish", "destination": "archive"}]}
    registered = api.put("/task-definitions/alice-digest", json=definition, headers=auth(admin))
    assert registered.status_code == 201, registered.text
    schedule = {"task_type": "monthly-report", "goal": {"month": "2026-06", "currency": "CNY"}, "cron": "0 9 1 1 *",
                "timezone": "UTC"}
    assert api.put("/task-schedules/alice-monthly", json=schedule, headers=auth(alice)).status_code == 201
    playbook = "---\nname: alice-playbook\nversion: '1'\ndescription: Tenant A's own.\n---\n## Role\nA's.\n"
    pushed = api.post("/skills", json={"space": "TENANT", "files": {"SKILL.md": playbook}}, headers=auth(admin))
    assert pushed.status_code == 201, pushed.text
    pending = _candidate(api, alice, "alice's pending claim")
    reviewer = make_key(tenant=tenant_a, user="kim", roles=("knowledge_reviewer",))
    approved_claim = _candidate(api, alice, "alice's published claim")
    review = {"decision": "approve", "content_sha256": approved_claim["content_sha256"],
              "state_version": approved_claim["state_version"]}
    item = api.post(f"/knowledge-candidates/{approved_claim['candidate_id']}/reviews", json=review,
                    headers=auth(reviewer))
    assert item.status_code == 200, item.text
    return World(
        ids={
            "memory": {"memory_id": memory.json()["memory_id"]},
            "deletion_job": {"job_id": job.json()["job_id"]},
            "hold": {"hold_id": hold.json()["hold_id"]},
            "task": {"task_id": waiting["task_id"], "sha256": waiting["draft_sha256"],
                     "state_version": str(waiting["state_version"])},
            "artifact": {"task_id": waiting["task_id"], "sha256": waiting["draft_sha256"]},
            "attempt": {"task_id": waiting["task_id"], "attempt_id": attempt_id},
            "operation": {"task_id": done["task_id"], "operation_id": done["operations"][0]["operation_id"]},
            "session": {"session_id": session_id},
            "commit": {"session_id": session_id, "commit_id": "c-1"},
            "record": {"resource": "todo", "record_id": record_id},
            "run": {"run_id": run.json()["run_id"]},
            "policy": {"agent_id": "planner", "resource": "todo"},
            "destination": {"name": "board"},
            "definition": {"task_type": "alice-digest"},
            "schedule": {"name": "alice-monthly"},
            "skill": {"name": "alice-playbook"},
            "candidate": {"candidate_id": pending["candidate_id"], "sha256": pending["content_sha256"],
                          "state_version": str(pending["state_version"])},
            "knowledge": {"knowledge_id": item.json()["knowledge"]["knowledge_id"]},
        },
        alice=alice,
        admin=admin,
        runtime=runtime,
        stranger=make_key(tenant=tenant_b, user="alice", roles=EVERY_ROLE),
        colleague=make_key(tenant=tenant_a, user="bob", roles=()),
    )


def _candidate(api: TestClient, author: str, claim: str) -> dict[str, Any]:
    body = {"key": claim.replace(" ", "-").replace("'", ""), "claim": claim, "authority": "P1",
            "source_refs": ["doc:probe"]}
    created = api.post("/knowledge-candidates", json=body, headers=auth(author))
    assert created.status_code == 201, created.text
    return dict(api.get(f"/knowledge-candidates/{created.json()['candidate_id']}", headers=auth(author)).json())


def _random_ids(ids: dict[str, str]) -> dict[str, str]:
    fresh = {name: str(uuid.uuid4()) for name in ids}
    if "sha256" in ids:
        fresh["sha256"] = uuid.uuid4().hex * 2
    if "state_version" in ids:
        fresh["state_version"] = ids["state_version"]
    if "resource" in ids:  # a declared type, not an id: the record id is what is random
        fresh["resource"] = ids["resource"]
    if "task_type" in ids:  # a name, which starts with a letter
        fresh["task_type"] = f"t{uuid.uuid4().hex}"
    return fresh


def _call(api: TestClient, key: str, method: str, path: str, ids: dict[str, str], body: Any) -> tuple[int, str]:
    if body == "approval":
        body = {"decision": "approve", "artifact_sha256": ids["sha256"], "state_version": int(ids["state_version"])}
    if body == "review":
        body = {"decision": "approve", "content_sha256": ids["sha256"], "state_version": int(ids["state_version"])}
    response = api.request(method, path.format(**ids), json=body, headers=auth(key))
    payload = response.json()
    payload.get("error", {}).pop("request_id", None)
    text = str(payload)
    for name, value in ids.items():
        if name != "state_version":
            text = text.replace(value, f"<{name}>")
    return response.status_code, text


@pytest.mark.parametrize("caller", sorted(EXPECTED))
@pytest.mark.parametrize(("method", "path"), sorted(ROUTES), ids=lambda value: str(value))
def test_another_tenants_or_users_object_answers_like_a_random_id(
    api: TestClient, world: World, caller: str, method: str, path: str
) -> None:
    kind, body = ROUTES[(method, path)]
    key = getattr(world, caller)
    real, random = world.ids[kind], _random_ids(world.ids[kind])
    theirs = _call(api, key, method, path, real, body)
    nothing = _call(api, key, method, path, random, body)
    if caller == "colleague" and (method, path) in TENANT_WIDE:
        assert (theirs[0], nothing[0]) == (200, 404), (theirs, nothing)
        return
    assert theirs == nothing, (caller, theirs, nothing)
    assert theirs[0] == EXPECTED[caller][(method, path)], theirs
    if (method, path) in LISTINGS:
        assert "'items': []" in theirs[1], theirs


def test_the_probes_changed_nothing(api: TestClient, world: World) -> None:
    """Runs after the probes (file order): alice's objects are as she left them."""
    memory = api.get(f"/memories/{world.ids['memory']['memory_id']}", headers=auth(world.alice))
    assert memory.status_code == 200 and memory.json()["status"] == "CANDIDATE" and memory.json()["version"] == 1
    task = api.get(f"/tasks/{world.ids['task']['task_id']}", headers=auth(world.alice)).json()
    assert task["status"] == "WAITING_FOR_APPROVAL" and task["pause_requested"] is False
    assert str(task["state_version"]) == world.ids["task"]["state_version"]
    chat = api.get(f"/sessions/{world.ids['session']['session_id']}", headers=auth(world.alice)).json()
    assert chat["messages"] == 1 and chat["committed_through"] == 1
    record = api.get(f"/records/todo/{world.ids['record']['record_id']}", headers=auth(world.alice)).json()
    assert record["version"] == 1 and record["data"] == {"title": "alice's", "status": "open"}
    run = api.get(f"/runs/{world.ids['run']['run_id']}", headers=auth(world.runtime)).json()
    assert run["ended_at"] is None
    policy = api.get("/policies/planner/todo", headers=auth(world.admin)).json()
    assert (policy["operations"], policy["fields"]) == (["read"], ["/title"])
    assert api.get("/publish-destinations/board", headers=auth(world.alice)).json()["kind"] == "archive"
    digest = api.get("/task-definitions/alice-digest", headers=auth(world.alice)).json()
    assert [version["version"] for version in digest["versions"]] == ["1"]
    schedule = api.get("/task-schedules/alice-monthly", headers=auth(world.alice)).json()
    assert schedule["paused"] is False and schedule["updated_at"] == schedule["created_at"]
    playbook = api.get("/skills/alice-playbook/versions", headers=auth(world.alice)).json()
    assert [version["version"] for version in playbook["items"]] == [1]
    pending = api.get(f"/knowledge-candidates/{world.ids['candidate']['candidate_id']}", headers=auth(world.alice))
    assert pending.json()["status"] == "PENDING_REVIEW"
    assert str(pending.json()["state_version"]) == world.ids["candidate"]["state_version"]
