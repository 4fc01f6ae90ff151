"""The agent protocol (issue 26, item 2) over REST, against the real PostgreSQL and Temporal: claim → heartbeat →
complete → what the workflow collects, replays, lease expiry and re-claim, failures up to giving up, a rejection's
reason in the next claim's input, who may perform a step, and the signal to the workflow (best effort)."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from memory.artifact_store import sha256_hex
from memory.db import tenant_session
from memory.errors import MnemoError
from memory.tasks import leases
from memory.tasks.artifacts import task_store
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus
from memory.tasks.steps import STEP_ATTEMPT_LIMIT
from memory.tasks.transitions import Transition, get_task, move
from tests.conftest import MakeKey, auth
from tests.tasks.agent_steps import NEXT, STEP, Waiting, collect, open_step, running_task, waiting_task

DRAFT = b"# June digest\n\nThree incidents.\n"
CHART = bytes(range(256)) * 4


@pytest.fixture()
def owner(make_key: MakeKey) -> tuple[str, str]:
    """A fresh tenant and its user alice's key."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    return tenant, make_key(tenant=tenant, user="alice")


def _claim(client: TestClient, key: str, task: Waiting, **body: Any) -> Any:
    return client.post(f"/tasks/{task.ref.task_id}/attempts", json=body, headers=auth(key))


def _claimed(client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
             ) -> tuple[str, Waiting, str]:
    """The owner's key, a task of theirs waiting for an agent, and the id of the attempt that claimed its step."""
    tenant, key = owner
    task = waiting_task(settings, engine, tenant)
    return key, task, _claim(client, key, task).json()["attempt_id"]


def _call(client: TestClient, key: str, task: Waiting, attempt: str, action: str, body: Any = None) -> Any:
    return client.post(f"/tasks/{task.ref.task_id}/attempts/{attempt}/{action}", json=body, headers=auth(key))


def _artifact(name: str, media_type: str, content: bytes) -> dict[str, str]:
    return {"name": name, "media_type": media_type, "content_base64": base64.b64encode(content).decode()}


def _timeline_attempts(client: TestClient, key: str, task: Waiting) -> list[dict[str, Any]]:
    entries = client.get(f"/tasks/{task.ref.task_id}/timeline", headers=auth(key)).json()["entries"]
    return [entry for entry in entries if entry["kind"] == "attempt"]


def _signals(settings: Settings, workflow_id: str) -> list[str]:
    """The names of the signals the workflow's history recorded."""

    async def read() -> list[str]:
        client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        return [event.workflow_execution_signaled_event_attributes.signal_name for event in history.events
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]

    return asyncio.run(read())


def test_claim_heartbeat_complete_and_the_workflow_collects_the_result(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    tenant, key = owner
    task = waiting_task(settings, engine, tenant)
    assert collect(engine, task).status == "WAITING"
    claimed = _claim(client, key, task, lease_seconds=60)
    assert claimed.status_code == 201, claimed.text
    body = claimed.json()
    assert (body["step_id"], body["attempt_number"]) == (STEP, 1)
    assert body["input"] == {"goal": {"month": "2026-06", "currency": "CNY"}, "artifacts": []}
    attempt = body["attempt_id"]
    time.sleep(1.1)
    renewed = _call(client, key, task, attempt, "heartbeat")
    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["lease_expires_at"] > body["lease_expires_at"]

    delivered = {"artifacts": [_artifact("digest.md", "text/markdown", DRAFT),
                               _artifact("chart.bin", "application/octet-stream", CHART)],
                 "output": {"incidents": 3}}
    done = _call(client, key, task, attempt, "complete", delivered)
    assert done.status_code == 200, done.text
    answer = done.json()
    assert (answer["status"], answer["step_id"], answer["replayed"]) == ("SUCCEEDED", STEP, False)
    shas = [artifact["sha256"] for artifact in answer["artifacts"]]
    for sha, content in zip(shas, (DRAFT, CHART), strict=True):
        got = client.get(f"/tasks/{task.ref.task_id}/artifacts/{sha}", headers=auth(key))
        assert got.status_code == 200 and got.content == content

    again = _call(client, key, task, attempt, "complete", delivered)
    assert again.status_code == 200 and again.json() == {**answer, "replayed": True}
    other = _call(client, key, task, attempt, "complete", {**delivered, "output": {"incidents": 4}})
    assert other.status_code == 409 and other.json()["error"]["code"] == "attempt_finished", other.text
    late_beat = _call(client, key, task, attempt, "heartbeat")
    assert late_beat.status_code == 409 and late_beat.json()["error"]["code"] == "attempt_finished"
    # The step is done: nothing is left to claim, though the workflow has not collected it yet.
    settled = _claim(client, key, task).json()["error"]
    assert settled["code"] == "no_step_ready" and settled["details"]["step_settled"] is True
    assert "about to move on" in settled["message"]  # not "it is WAITING_FOR_EXTERNAL", which reads as a riddle

    outcome = collect(engine, task)
    assert (outcome.status, outcome.output) == ("SUCCEEDED", {"incidents": 3})
    assert outcome.artifacts == [{"step_id": STEP, **{k: a[k] for k in ("name", "media_type", "sha256")}}
                                 for a in answer["artifacts"]]
    with tenant_session(engine, tenant) as session:
        row = get_task(session, tenant, task.ref.task_id)
        assert (row.status, row.current_step_id, row.completed_step_ids) == ("RUNNING", NEXT, [STEP])
        assert row.state_version == task.state_version + 1 == outcome.state_version
    assert collect(engine, task) == outcome  # a retried collect: the same answer, the move not made twice

    [entry] = _timeline_attempts(client, key, task)
    assert (entry["status"], entry["actor"], entry["attempt_number"]) == ("SUCCEEDED", "alice", 1)
    renewed_until = datetime.fromisoformat(renewed.json()["lease_expires_at"])
    assert datetime.fromisoformat(entry["lease_expires_at"]) == renewed_until
    assert _signals(settings, task.workflow_id) == ["agent_step_settled", "agent_step_settled"]  # the replay too


def test_an_expired_lease_refuses_the_result_and_the_step_is_claimed_again(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    tenant, key = owner
    task = waiting_task(settings, engine, tenant)
    first = _claim(client, key, task, lease_seconds=5).json()
    held = _claim(client, key, task)
    assert held.status_code == 409, held.text
    assert held.json()["error"]["code"] == "step_claimed"
    assert held.json()["error"]["details"]["attempt_id"] == first["attempt_id"]
    time.sleep(5.5)
    late = _call(client, key, task, first["attempt_id"], "complete",
                 {"artifacts": [_artifact("a.md", "text/plain", b"a")]})
    assert late.status_code == 409 and late.json()["error"]["code"] == "lease_expired", late.text
    assert _call(client, key, task, first["attempt_id"], "heartbeat").json()["error"]["code"] == "lease_expired"
    second = _claim(client, key, task, lease_seconds=60)
    assert second.status_code == 201 and second.json()["attempt_number"] == 2, second.text
    statuses = [(e["attempt_number"], e["status"]) for e in _timeline_attempts(client, key, task)]
    assert sorted(statuses) == [(1, "LEASE_EXPIRED"), (2, "RUNNING")]
    assert collect(engine, task).status == "WAITING"


def test_concurrent_claims_one_wins(settings: Settings, engine: Engine, owner: tuple[str, str]) -> None:
    """The step row's lock serialises claims: of eight at once, one holds the step and seven hear step_claimed."""
    tenant, _ = owner
    task = waiting_task(settings, engine, tenant)

    def claim(number: int) -> str:
        try:
            leases.claim(partial(tenant_session, engine, tenant), task.ref, step_id=None, lease_seconds=60,
                         actor=f"agent-{number}", worker="key:k")
        except MnemoError as error:
            return error.code
        return "claimed"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = sorted(pool.map(claim, range(8)))
    assert outcomes == ["claimed"] + ["step_claimed"] * 7


def test_no_step_ready_before_the_step_opens_and_for_another_step(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    tenant, key = owner
    task = running_task(settings, engine, tenant)
    early = _claim(client, key, task)
    assert early.status_code == 409, early.text
    error = early.json()["error"]
    assert error["code"] == "no_step_ready" and error["details"] == {"status": "RUNNING", "current_step_id": STEP}
    open_step(engine, task)
    assert _claim(client, key, task, step_id="publish").json()["error"]["code"] == "no_step_ready"
    assert _claim(client, key, task, step_id=STEP).status_code == 201


def test_a_task_cancelled_while_its_agent_works_takes_no_result(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    key, task, attempt = _claimed(client, settings, engine, owner)
    with tenant_session(engine, task.ref.tenant_id) as session:
        move(session, task.ref, Transition(task.state_version, "cancel", TaskStatus.CANCELLED))
    for action, body in (("heartbeat", None), ("complete", {"artifacts": []}),
                         ("fail", {"reason": "r", "retryable": True})):
        refused = _call(client, key, task, attempt, action, body)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "task_closed", refused.text
    assert _claim(client, key, task).json()["error"]["code"] == "no_step_ready"
    assert collect(engine, task).status == "WAITING"  # nothing was recorded


def test_failures_the_step_is_claimed_again_until_it_gives_up(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    tenant, key = owner
    task = waiting_task(settings, engine, tenant)
    for number in range(1, STEP_ATTEMPT_LIMIT + 1):
        claimed = _claim(client, key, task, lease_seconds=60)
        assert claimed.status_code == 201 and claimed.json()["attempt_number"] == number, claimed.text
        failed = _call(client, key, task, claimed.json()["attempt_id"], "fail",
                       {"reason": f"upstream API down ({number})", "retryable": True})
        assert failed.status_code == 200, failed.text
        expected = "GAVE_UP" if number == STEP_ATTEMPT_LIMIT else "WAITING"
        assert failed.json() == {"attempt_id": claimed.json()["attempt_id"], "step_id": STEP, "status": "FAILED",
                                 "step_status": expected, "replayed": False}
        if number < STEP_ATTEMPT_LIMIT:
            assert collect(engine, task).status == "WAITING"
    replay = _call(client, key, task, claimed.json()["attempt_id"], "fail",
                   {"reason": f"upstream API down ({STEP_ATTEMPT_LIMIT})", "retryable": True})
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    assert _claim(client, key, task).json()["error"]["code"] == "no_step_ready"
    outcome = collect(engine, task)
    assert outcome.status == "GAVE_UP"
    assert outcome.error == {"code": "agent_failed", "message": "upstream API down (5)", "retryable": True}

    once = waiting_task(settings, engine, tenant)
    attempt = _claim(client, key, once).json()["attempt_id"]
    final = _call(client, key, once, attempt, "fail", {"reason": "the goal names no service", "retryable": False})
    assert final.json()["step_status"] == "GAVE_UP"
    assert collect(engine, once).error == {"code": "agent_failed", "message": "the goal names no service",
                                           "retryable": False}


def test_a_rejections_reason_is_in_the_next_claims_input(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    key, task, attempt = _claimed(client, settings, engine, owner)
    draft = _call(client, key, task, attempt, "complete",
                  {"artifacts": [_artifact("digest.md", "text/markdown", DRAFT)]})
    collect(engine, task)
    # The approver rejected it: the workflow opens the redraft, input version r1, with the reviewer's note.
    open_step(engine, task, "r1", {"revision": 1, "reviewer_note": "name the on-call engineer"})
    redraft = _claim(client, key, task).json()
    assert redraft["attempt_number"] == 1
    assert redraft["input"]["rejection_reason"] == "name the on-call engineer"
    assert redraft["input"]["artifacts"] == [{"step_id": STEP, **{k: a[k] for k in ("name", "media_type", "sha256")}}
                                             for a in draft.json()["artifacts"]]


def test_who_may_perform_a_step(
    client: TestClient, settings: Settings, engine: Engine, make_key: MakeKey, owner: tuple[str, str]
) -> None:
    tenant, key = owner
    runtime = make_key(tenant=tenant, user="alice", roles=("agent_runtime",), agent="digester")
    colleague = make_key(tenant=tenant, user="carol")
    approver = make_key(tenant=tenant, user="bob", roles=("approver",))
    stranger = make_key(user="alice", roles=("admin",))
    task = waiting_task(settings, engine, tenant)
    missing = Waiting(TaskRef(tenant, str(uuid.uuid4())), "", 0)
    for caller in (colleague, stranger):  # another user's task, another tenant's: the 404 of a missing one
        theirs, nothing = _claim(client, caller, task), _claim(client, caller, missing)
        assert theirs.status_code == nothing.status_code == 404
        assert theirs.json()["error"]["message"].replace(task.ref.task_id, "<id>") == \
            nothing.json()["error"]["message"].replace(missing.ref.task_id, "<id>")
    refused = _claim(client, approver, task)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    claimed = _claim(client, runtime, task)
    assert claimed.status_code == 201, claimed.text
    attempt = claimed.json()["attempt_id"]
    assert _call(client, colleague, task, attempt, "heartbeat").status_code == 404
    assert _call(client, key, task, str(uuid.uuid4()), "heartbeat").json()["error"]["code"] == "attempt_not_found"
    assert _call(client, key, task, "not-an-id", "heartbeat").json()["error"]["code"] == "attempt_not_found"
    assert _call(client, key, task, attempt, "heartbeat").status_code == 200  # the owner's own key, any of them
    [entry] = _timeline_attempts(client, key, task)
    assert entry["actor"] == "digester"


def test_bad_deliveries_are_refused_naming_the_artifact_and_change_nothing(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    key, task, attempt = _claimed(client, settings, engine, owner)
    content = f"a draft of this test's own: {uuid.uuid4()}".encode()
    good = _artifact("digest.md", "text/markdown", content)
    bad = _call(client, key, task, attempt, "complete",
                {"artifacts": [good, {**good, "name": "b.md", "content_base64": "bm90IGJhc2U2NA=!"}]})
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["code"] == "invalid_base64"
    assert bad.json()["error"]["details"] == {"field": "artifacts.1.content_base64"}
    twice = _call(client, key, task, attempt, "complete", {"artifacts": [good, good]})
    assert twice.json()["error"]["code"] == "duplicate_artifact_name"
    for name in ('x"; filename=evil.html', "a\r\nX-Evil: 1"):  # a name never becomes a header of its own
        odd = _call(client, key, task, attempt, "complete", {"artifacts": [{**good, "name": name}]})
        assert odd.status_code == 422 and odd.json()["error"]["fields"][0]["field"] == "artifacts.0.name", odd.text
    short = _claim(client, key, task, lease_seconds=4)
    assert short.status_code == 422 and short.json()["error"]["fields"][0]["field"] == "lease_seconds"
    assert [e["status"] for e in _timeline_attempts(client, key, task)] == ["RUNNING"]
    assert collect(engine, task).status == "WAITING"
    assert not task_store(settings.artifact_root(engine)).exists(sha256_hex(content))  # none stored before a 422


def test_the_result_is_recorded_when_temporal_cannot_be_reached(
    settings: Settings, engine: Engine, owner: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    tenant, key = owner
    task = waiting_task(settings, engine, tenant)
    down = settings.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"})
    with TestClient(create_app(down)) as client, caplog.at_level(logging.WARNING, logger="mnemo.tasks.agents"):
        attempt = _claim(client, key, task).json()["attempt_id"]
        done = _call(client, key, task, attempt, "complete", {"artifacts": [], "output": {"ok": True}})
        assert done.status_code == 200, done.text
    assert collect(engine, task).output == {"ok": True}
    assert any("agent_step_settled" in record.getMessage() for record in caplog.records)


def test_an_artifact_named_in_any_script_is_served_under_its_name(
    client: TestClient, settings: Settings, engine: Engine, owner: tuple[str, str]
) -> None:
    key, task, attempt = _claimed(client, settings, engine, owner)
    content = f"摘要 {uuid.uuid4()}".encode()
    done = _call(client, key, task, attempt, "complete",
                 {"artifacts": [_artifact("事故摘要.md", "text/markdown; charset=utf-8", content)]})
    assert done.status_code == 200, done.text
    served = client.get(f"/tasks/{task.ref.task_id}/artifacts/{sha256_hex(content)}", headers=auth(key))
    assert served.status_code == 200 and served.content == content
    assert served.headers["content-disposition"] == \
        "inline; filename=\"____.md\"; filename*=UTF-8''%E4%BA%8B%E6%95%85%E6%91%98%E8%A6%81.md"
