"""``/task-schedules`` over the real API, the real Temporal Schedules and a real worker (issue 26, item 5).

Firings are made deterministic with Temporal's own controls instead of waiting for a cron: a backfill over a
window holding one fire time fires it with that nominal time; ``trigger`` fires now.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleBackfill,
    ScheduleDescription,
    WorkflowFailureError,
)
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner, Result

from api.cli.task import task_app
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from tests.conftest import MakeKey, auth, poll
from tests.tasks.conftest import Team
from tests.workers import ThreadWorker, served
from workflows.scheduled_task import schedule_id

T = TypeVar("T")
MONTHLY = {"task_type": "monthly-report", "goal": {"month": "{{fire.previous_month}}", "currency": "CNY"},
           "cron": "0 9 1 * *", "timezone": "Asia/Shanghai"}
MARCH_1ST = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
"""09:00 in Shanghai on 1 March 2026: a fire time of :data:`MONTHLY`."""
AGENT_TYPE = {"version": "1", "goal_schema": {"type": "object"}, "redraft_step": "write", "steps": [
    {"step_id": "write", "kind": "agent"}, {"step_id": "review", "kind": "approval", "artifact_from": "write/x.md"},
    {"step_id": "send", "kind": "publish", "destination": "archive"}]}


def on_temporal(settings: Settings, call: Callable[[Client], Awaitable[T]]) -> T:
    async def run() -> T:
        return await call(await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace))

    return asyncio.run(run())


def describe(settings: Settings, tenant: str, name: str) -> ScheduleDescription:
    return on_temporal(settings, lambda c: c.get_schedule_handle(schedule_id(tenant, name)).describe())


def fire(settings: Settings, tenant: str, name: str, at: datetime | None = None, *, expect: int) -> list[Any]:
    """Fire at ``at`` (a backfill of the minute around it) or now (a trigger), wait until the schedule has taken
    ``expect`` actions in all, and return each firing's result (its task id, None: it started nothing)."""

    async def run(client: Client) -> list[Any]:
        handle = client.get_schedule_handle(schedule_id(tenant, name))
        if at is None:
            await handle.trigger()
        else:
            await handle.backfill(ScheduleBackfill(start_at=at - timedelta(seconds=30),
                                                   end_at=at + timedelta(seconds=30)))
        for _ in range(300):
            actions = (await handle.describe()).info.recent_actions
            if len(actions) >= expect:
                break
            await asyncio.sleep(0.1)
        assert len(actions) == expect, actions
        results = []
        for action in actions:
            started = action.action
            assert isinstance(started, ScheduleActionExecutionStartWorkflow)
            run_handle = client.get_workflow_handle(started.workflow_id, run_id=started.first_execution_run_id)
            try:
                results.append(await asyncio.wait_for(run_handle.result(), timeout=60))
            except WorkflowFailureError as exc:
                results.append(exc)
        return results

    return on_temporal(settings, run)


def put(client: TestClient, key: str, name: str, **overrides: Any) -> Any:
    return client.put(f"/task-schedules/{name}", json={**MONTHLY, **overrides}, headers=auth(key))


def tasks_of(client: TestClient, key: str) -> list[dict[str, Any]]:
    return list(client.get("/tasks", headers=auth(key)).json()["items"])


def test_put_makes_a_temporal_schedule_with_the_cron_and_timezone(client: TestClient, team: Team,
                                                                  settings: Settings, engine: Engine) -> None:
    created = put(client, team.owner, "monthly")
    assert created.status_code == 201, created.text
    assert created.json()["owner_user_id"] == "alice" and created.json()["paused"] is False
    again = put(client, team.owner, "monthly")
    assert again.status_code == 200 and again.json()["updated_at"] == created.json()["updated_at"]
    described = describe(settings, team.tenant, "monthly")
    assert described.schedule.spec.time_zone_name == "Asia/Shanghai"
    # 09:00 on the 1st in Shanghai is 01:00 UTC on the 1st, every month.
    upcoming = described.info.next_action_times[:3]
    assert len(upcoming) == 3 and all((t.day, t.hour, t.minute) == (1, 1, 0) for t in upcoming), upcoming
    shown = client.get("/task-schedules/monthly", headers=auth(team.owner)).json()
    assert shown["next_fire_times"] == [t.isoformat() for t in upcoming]
    assert shown["cron"] == "0 9 1 * *" and shown["last_task_id"] is None
    replaced = put(client, team.owner, "monthly", cron="30 8 * * 1", timezone="UTC")
    assert replaced.status_code == 200 and replaced.json()["cron"] == "30 8 * * 1"
    upcoming = describe(settings, team.tenant, "monthly").info.next_action_times[:3]
    assert all((t.weekday(), t.hour, t.minute) == (0, 8, 30) for t in upcoming), upcoming
    with tenant_session(engine, team.tenant) as session:
        assert session.execute(text("SELECT count(*) FROM task_schedules")).scalar_one() == 1


def test_a_fire_time_delivered_twice_starts_one_task_as_the_owner_with_the_goal_resolved(
    client: TestClient, team: Team, settings: Settings, task_worker: ThreadWorker
) -> None:
    assert put(client, team.owner, "monthly").status_code == 201
    first = fire(settings, team.tenant, "monthly", MARCH_1ST, expect=1)
    second = fire(settings, team.tenant, "monthly", MARCH_1ST, expect=2)
    assert first[0] == second[0] == second[1] and isinstance(first[0], str)
    owned = tasks_of(client, team.owner)
    assert [task["task_id"] for task in owned] == [first[0]]
    task = client.get(f"/tasks/{first[0]}", headers=auth(team.owner)).json()
    assert task["task_type"] == "monthly-report" and task["owner_user_id"] == "alice"
    assert task["goal"] == {"month": "2026-02", "currency": "CNY"}  # the month before 1 March, in Shanghai
    shown = client.get("/task-schedules/monthly", headers=auth(team.owner)).json()
    assert shown["last_task_id"] == first[0] and shown["last_error"] is None
    assert datetime.fromisoformat(shown["last_fired_at"]) == MARCH_1ST


def test_paused_or_deleted_schedules_start_nothing(client: TestClient, team: Team, settings: Settings,
                                                   engine: Engine, task_worker: ThreadWorker) -> None:
    assert put(client, team.owner, "daily", cron="0 6 * * *", goal={"month": "2026-01", "currency": "CNY"}).is_success
    paused = client.post("/task-schedules/daily/pause", headers=auth(team.owner))
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert describe(settings, team.tenant, "daily").schedule.state.paused is True
    assert client.get("/task-schedules/daily", headers=auth(team.owner)).json()["next_fire_times"] == []
    # Temporal runs a manual trigger even while paused: the firing reads the row, and starts nothing.
    assert fire(settings, team.tenant, "daily", expect=1) == [None]
    # The row is the registry: paused there alone (Temporal unpaused), a firing still starts nothing.
    assert client.post("/task-schedules/daily/unpause", headers=auth(team.owner)).json()["paused"] is False
    assert describe(settings, team.tenant, "daily").schedule.state.paused is False
    with tenant_session(engine, team.tenant) as session:
        session.execute(text("UPDATE task_schedules SET paused = true WHERE name = 'daily'"))
    assert fire(settings, team.tenant, "daily", expect=2) == [None, None]
    assert tasks_of(client, team.owner) == []
    assert client.delete("/task-schedules/daily", headers=auth(team.owner)).status_code == 204
    assert client.get("/task-schedules/daily", headers=auth(team.owner)).status_code == 404
    with pytest.raises(RPCError) as gone:
        describe(settings, team.tenant, "daily")
    assert gone.value.status == RPCStatusCode.NOT_FOUND
    with tenant_session(engine, team.tenant) as session:
        assert session.execute(text("SELECT count(*) FROM task_schedules")).scalar_one() == 0


def test_a_firing_pins_the_definition_of_its_fire_time_and_records_a_refusal(
    client: TestClient, team: Team, make_key: MakeKey, settings: Settings, task_worker: ThreadWorker
) -> None:
    admin = make_key(tenant=team.tenant, user="ada", roles=("admin",))

    def register(body: dict[str, Any]) -> Any:
        return client.put("/task-definitions/digest", json=body, headers=auth(admin))

    assert register(AGENT_TYPE).status_code == 201
    day = {"task_type": "digest", "goal": {"day": "{{fire.date}}"}, "cron": "0 18 * * *", "timezone": "Europe/Berlin"}
    assert client.put("/task-schedules/digest", json=day, headers=auth(team.owner)).status_code == 201
    assert register({**AGENT_TYPE, "version": "2"}).status_code == 201
    at = datetime(2026, 6, 30, 16, 0, tzinfo=UTC)  # 18:00 in Berlin (summer time)
    [task_id] = fire(settings, team.tenant, "digest", at, expect=1)
    task = poll(client, team.owner, f"/tasks/{task_id}", lambda view: view.get("workflow_version") == "2", 30)
    assert task["goal"] == {"day": "2026-06-30"}
    refusing = {**AGENT_TYPE, "version": "3", "goal_schema": {"type": "object", "required": ["region"]}}
    assert register(refusing).status_code == 201
    _, failed = fire(settings, team.tenant, "digest", at + timedelta(days=1), expect=2)
    assert isinstance(failed, WorkflowFailureError)
    shown = client.get("/task-schedules/digest", headers=auth(team.owner)).json()
    assert shown["last_error"]["code"] == "missing_field" and shown["last_task_id"] is None
    assert len(tasks_of(client, team.owner)) == 1


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"cron": "0 9 1 *"}, "invalid_cron"),
        ({"cron": "61 9 1 * *"}, "invalid_cron"),
        ({"cron": "0 9 5-1 * *"}, "invalid_cron"),
        ({"cron": "@monthly"}, "invalid_cron"),
        ({"timezone": "Mars/Olympus"}, "invalid_timezone"),
        ({"goal": {"month": "{{fire.month}}", "currency": "CNY"}}, "unknown_placeholder"),
        ({"task_type": "weekly"}, "invalid_value"),
        ({"goal": {"month": "{{fire.previous_month}}", "currency": "JPY"}}, "unsupported_currency"),
        ({"goal": {"month": "{{fire.date}}", "currency": "CNY"}}, "invalid_value"),
    ],
)
def test_put_refuses_what_a_firing_could_not_start(client: TestClient, team: Team, settings: Settings,
                                                   overrides: dict[str, Any], code: str) -> None:
    refused = put(client, team.owner, "bad", **overrides)
    assert (refused.status_code, refused.json()["error"]["code"]) == (422, code), refused.text
    assert client.get("/task-schedules/bad", headers=auth(team.owner)).status_code == 404
    with pytest.raises(RPCError):
        describe(settings, team.tenant, "bad")


def test_a_goal_is_refused_in_post_tasks_shape(client: TestClient, team: Team) -> None:
    goal = {"month": "2026-06", "currency": "JPY"}
    scheduled = put(client, team.owner, "yen", goal=goal).json()["error"]
    posted = client.post("/tasks", json={"task_type": "monthly-report", "request_intent_id": "x", "goal": goal},
                         headers=auth(team.owner)).json()["error"]
    assert (scheduled["code"], scheduled["fields"], scheduled["details"]) == (
        posted["code"], posted["fields"], posted["details"])
    assert put(client, team.owner, "Bad Name").json()["error"]["code"] == "invalid_schedule_name"


def test_owners_admins_colleagues_and_other_tenants(client: TestClient, team: Team, make_key: MakeKey,
                                                    settings: Settings) -> None:
    assert put(client, team.owner, "monthly").status_code == 201
    admin = make_key(tenant=team.tenant, user="ada", roles=("admin",))
    stranger = make_key(tenant=f"t-{uuid.uuid4().hex[:12]}", user="alice", roles=("admin",))  # another tenant's
    for key in (team.other_user, stranger):
        assert client.get("/task-schedules/monthly", headers=auth(key)).status_code == 404
        assert client.post("/task-schedules/monthly/pause", headers=auth(key)).status_code == 404
        assert client.delete("/task-schedules/monthly", headers=auth(key)).status_code == 404
        assert client.get("/task-schedules", headers=auth(key)).json()["items"] == []
    taken = put(client, team.other_user, "monthly")
    assert (taken.status_code, taken.json()["error"]["code"]) == (409, "schedule_name_taken")
    assert client.get("/task-schedules?owner=all", headers=auth(team.other_user)).status_code == 403
    assert [s["name"] for s in client.get("/task-schedules?owner=all", headers=auth(admin)).json()["items"]] == [
        "monthly"]
    assert client.get("/task-schedules/monthly", headers=auth(admin)).json()["owner_user_id"] == "alice"
    assert client.delete("/task-schedules/monthly", headers=auth(admin)).status_code == 204
    assert client.get("/task-schedules", headers=auth(team.owner)).json()["items"] == []


@pytest.fixture(scope="module")
def api_url(settings: Settings) -> Iterator[str]:
    """The suite's API behind a real uvicorn: the CLI reaches it over HTTP like any client."""
    with served(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}"


def test_the_cli_puts_shows_pauses_and_deletes_a_schedule(api_url: str, team: Team) -> None:
    def cli(*args: str) -> Result:
        return CliRunner().invoke(task_app, ["schedule", *args, "--api-url", api_url, "--key", team.owner])

    put = cli("put", "monthly", "--type", "monthly-report", "--cron", "0 9 1 * *", "--timezone", "Asia/Shanghai",
              "--goal", '{"month": "{{fire.previous_month}}", "currency": "CNY"}')
    assert put.exit_code == 0, put.output
    assert put.output.split("\n")[0].split() == ["name", "monthly"]
    shown = cli("show", "monthly", "--json")
    assert shown.exit_code == 0 and len(json.loads(shown.output)["next_fire_times"]) == 3, shown.output
    listed = cli("list")
    assert listed.output.splitlines()[1].split()[:5] == ["monthly", "monthly-report", "0", "9", "1"], listed.output
    assert "paused          True" in cli("pause", "monthly").output
    assert "paused          False" in cli("unpause", "monthly").output
    refused = cli("put", "bad", "--type", "monthly-report", "--cron", "0 9 1 *", "--goal", "{}")
    assert refused.exit_code != 0 and "invalid_cron" in refused.output
    deleted = cli("delete", "monthly")
    assert (deleted.exit_code, deleted.output.strip()) == (0, "deleted schedule monthly")
    assert cli("list").output.strip() == "no schedules"
