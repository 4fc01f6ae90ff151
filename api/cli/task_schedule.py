"""``mnemo task schedule put|list|show|delete|pause|unpause``: task schedules over the HTTP API.

A schedule starts a task of a registered type on a cron, in a timezone, as the user of the key that put it; its
goal may say ``{{fire.previous_month}}`` or ``{{fire.date}}``, resolved at each firing.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from api.cli.options import Client, api_client
from api.cli.output import json_option, table

schedule_app = typer.Typer(help="Task schedules: start a task of a type on a cron, in a timezone.",
                           no_args_is_help=True)

COLUMNS = ["name", "task_type", "cron", "timezone", "paused", "owner_user_id", "last_fired_at", "last_task_id"]


def _render(s: dict[str, Any]) -> str:
    lines = [f"{name:<15} {s.get(name) if s.get(name) is not None else '-'}" for name in COLUMNS]
    lines.append(f"{'goal':<15} {json.dumps(s['goal'], ensure_ascii=False)}")
    if s.get("last_error"):
        lines.append(f"{'last error':<15} {s['last_error'].get('code')}: {s['last_error'].get('message')}")
    if s.get("next_fire_times") is not None:
        lines.append(f"{'next fires':<15} {', '.join(s['next_fire_times']) or '- (paused)'}")
    return "\n".join(lines)


@schedule_app.command("put")
@api_client
def put(
    name: str,
    task_type: Annotated[str, typer.Option("--type", help="A registered task type.")],
    goal: Annotated[str, typer.Option(help='The goal as JSON; a string may say {{fire.previous_month}} or '
                                           '{{fire.date}}, e.g. \'{"month": "{{fire.previous_month}}", '
                                           '"currency": "CNY"}\'.')],
    cron: Annotated[str, typer.Option(help="Five fields: minute hour day-of-month month day-of-week, e.g. "
                                           "'0 9 1 * *' (the 1st at 09:00).")],
    timezone: Annotated[str, typer.Option(help="An IANA timezone, e.g. Asia/Shanghai.")] = "UTC",
    *,
    client: Client,
) -> None:
    """Create or replace a schedule of yours (the same options again change nothing)."""
    parsed = json_option(goal, "--goal", '{"month": "{{fire.previous_month}}"}')
    body = {"task_type": task_type, "goal": parsed, "cron": cron, "timezone": timezone}
    client.answer(client.call("PUT", f"/task-schedules/{name}", json=body), _render)


@schedule_app.command("list")
@api_client
def list_schedules(
    every_owner: Annotated[bool, typer.Option("--all", help="Every schedule of the tenant (admin).")] = False,
    *,
    client: Client,
) -> None:
    """Your schedules by name (every one of the tenant with --all)."""
    listed = client.call("GET", "/task-schedules", params={"owner": "all" if every_owner else "me"})
    client.answer(listed, lambda r: table(r["items"], COLUMNS) if r["items"] else "no schedules")


@schedule_app.command("show")
@api_client
def show(name: str, *, client: Client) -> None:
    """A schedule, its last firing's outcome and its next fire times."""
    client.answer(client.call("GET", f"/task-schedules/{name}"), _render)


def _control(action: str, doc: str) -> None:
    """``pause`` and ``unpause``: the same call, on the action's route."""

    def command(name: str, *, client: Client) -> None:
        client.answer(client.call("POST", f"/task-schedules/{name}/{action}"), _render)

    command.__doc__ = doc
    schedule_app.command(action)(api_client(command))


_control("pause", "Start no task until unpaused.")
_control("unpause", "Fire again from the next fire time.")


@schedule_app.command("delete")
@api_client
def delete(name: str, *, client: Client) -> None:
    """Remove the schedule (the tasks it started run on)."""
    client.call("DELETE", f"/task-schedules/{name}")
    client.answer({"deleted": name}, lambda r: f"deleted schedule {r['deleted']}")
