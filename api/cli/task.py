"""``mnemo task …``: start, list, show, approve, reject, pause, resume, cancel and resolve report tasks; list the
task types (``types``), register or show a type's definition (``definition put|show``), perform an agent step
(``attempt claim|heartbeat|complete|fail``, :mod:`api.cli.task_attempt`) and schedule tasks (``schedule ...``,
:mod:`api.cli.task_schedule`).

It talks to the HTTP API with an API key, like any other client (:mod:`api.cli.http`: ``--api-url``, ``--key`` or
``--key-file``, else the running ``mnemo dev`` of ``--data-dir`` and its admin key). Tables for people, ``--json``
for scripts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.options import Client, api_client
from api.cli.output import fail, json_file, json_option, table
from api.cli.task_attempt import attempt_app
from api.cli.task_schedule import schedule_app
from memory.reports import MONTHLY_REPORT
from memory.reports.sales import RATES_TO_CNY

task_app = typer.Typer(help="Durable report tasks.", no_args_is_help=True)
definition_app = typer.Typer(help="Task definitions: a task type's goal schema and steps, versioned.",
                             no_args_is_help=True)
task_app.add_typer(definition_app, name="definition")
task_app.add_typer(attempt_app, name="attempt")
task_app.add_typer(schedule_app, name="schedule")


def _render_task(view: dict[str, Any]) -> str:
    fields = [
        "task_id",
        "status",
        "waiting_reason",
        "current_step_id",
        "state_version",
        "workflow_id",
        "workflow_version",
    ]
    out = [f"{name:<17} {view.get(name) if view.get(name) is not None else '-'}" for name in fields]
    out.append(f"{'goal':<17} {json.dumps(view.get('goal'), ensure_ascii=False)}")
    out.append(f"{'completed':<17} {', '.join(view.get('completed_step_ids') or []) or '-'}")
    pending = view.get("pending_approval")
    if pending:
        out.append(
            f"{'awaiting approval':<17} draft {pending['artifact_sha256']} (deadline {pending.get('deadline_at', '-')})"
        )
        if pending.get("summary"):
            out.append(f"{'':<17} {pending['summary']}")
    if view.get("error"):
        out.append(f"{'error':<17} {view['error'].get('code')}: {view['error'].get('message')}")
    if view.get("operations"):
        out += ["", table(view["operations"], ["operation_id", "kind", "destination", "status", "publication_id"])]
    return "\n".join(out)


@task_app.command("start")
@api_client
def start(
    month: Annotated[str | None, typer.Option(help="The monthly report's month, YYYY-MM.")] = None,
    currency: Annotated[str, typer.Option(help=f"The monthly report's currency ({', '.join(RATES_TO_CNY)}).")] = "CNY",
    task_type: Annotated[str, typer.Option("--type", help="Any registered task type.")] = MONTHLY_REPORT,
    goal: Annotated[str | None, typer.Option(help='The goal as JSON, e.g. \'{"week": "2026-W23"}\'.')] = None,
    intent: Annotated[str | None, typer.Option(help="request_intent_id; the same one names the same task.")] = None,
    destination: Annotated[str | None, typer.Option(help="Publish here instead of the type's destination.")] = None,
    *,
    client: Client,
) -> None:
    """Start a task (idempotent: re-running it returns the same task): the monthly report of --month, or any
    registered --type with its --goal (checked against the type's goal schema)."""
    if goal is not None:
        parsed = json_option(goal, "--goal", '{"month": "2026-06", "currency": "CNY"}')
        named = hashlib.sha256(json.dumps(parsed, sort_keys=True).encode()).hexdigest()[:16]
    elif month is not None:
        parsed, named = {"month": month, "currency": currency}, f"{month}-{currency}"
    else:
        fail("say what to do: --month YYYY-MM for the monthly report, or --type TYPE --goal JSON")
    body = {
        "task_type": task_type,
        "request_intent_id": intent or f"cli-{task_type}-{named}",
        "goal": parsed,
        **({"destination": destination} if destination is not None else {}),
    }
    created = client.call("POST", "/tasks", json=body)
    client.answer(
        created,
        lambda c: (
            f"task {c['task_id']} {c['status']} (state_version {c['state_version']})"
            + (" — already existed" if c.get("replayed") else "")
        ),
    )


@task_app.command("list")
@api_client
def list_tasks(
    status: Annotated[str | None, typer.Option(help="Only tasks in this status.")] = None,
    all_users: Annotated[bool, typer.Option("--all", help="Every user's tasks (approver/operator/auditor).")] = False,
    *,
    client: Client,
) -> None:
    """Your tasks (or everyone's with --all), most recently changed first."""
    params = {"owner": "all" if all_users else "me", **({"status": status} if status else {})}
    listed = client.call("GET", "/tasks", params=params)
    columns = ["task_id", "status", "current_step_id", "state_version", "owner_user_id", "updated_at"]
    client.answer(listed, lambda d: table(d["items"], columns) if d["items"] else "no tasks")


@task_app.command("show")
@api_client
def show(
    task_id: str,
    timeline: Annotated[
        bool, typer.Option("--timeline", help="Also print attempts, checkpoints, approvals, operations.")
    ] = False,
    *,
    client: Client,
) -> None:
    """A task's live state (and its timeline)."""
    view = client.call("GET", f"/tasks/{task_id}")
    if view.get("publications"):
        # What a person can open: the console's page of the published report (sign in with a key).
        view["report_url"] = f"{client.conn.api_url}/console/tasks/{task_id}/report"
    if timeline:
        view["timeline"] = client.call("GET", f"/tasks/{task_id}/timeline")

    def render(v: dict[str, Any]) -> str:
        text = _render_task(v)
        if "report_url" in v:
            text += f"\n\n{'published report':<17} {v['report_url']}"
        if "timeline" in v:
            entries = [
                {
                    **e,
                    "what": e.get("reason") or e.get("step_id") or e.get("operation_kind") or e.get("reminder_number"),
                }
                for e in v["timeline"]["entries"]
            ]
            text += f"\n\nrun {v['timeline']['run_id']}\n" + table(
                entries, ["at", "kind", "what", "status", "state_version"]
            )
        return text

    client.answer(view, render)


def _decide(
    task_id: str,
    decision: str,
    sha: str | None,
    version: int | None,
    reason: str | None,
    client: Client,
) -> None:
    if sha is None or version is None:
        view = client.call("GET", f"/tasks/{task_id}")
        pending = view.get("pending_approval")
        if not pending:
            fail(f"task {task_id} is {view['status']}, not waiting for approval")
        sha = sha or pending["artifact_sha256"]
        version = view["state_version"] if version is None else version
        if not client.as_json:
            typer.echo(f"{decision} draft {sha} at state_version {version}: {pending.get('summary', '')}")
    body: dict[str, Any] = {"decision": decision, "artifact_sha256": sha, "state_version": version}
    if reason:
        body["reason"] = reason
    result = client.call("POST", f"/tasks/{task_id}/approvals", json=body)
    client.answer(
        result,
        lambda r: (
            f"{'approved' if r['decision'] == 'approve' else 'rejected'}: "
            f"task is {r['status']} (state_version {r['state_version']})"
            + (" — already recorded" if r.get("replayed") else "")
        ),
    )


@task_app.command("approve")
@api_client
def approve(
    task_id: str,
    sha: Annotated[
        str | None, typer.Option("--sha", help="Draft sha256 you reviewed (default: the current draft).")
    ] = None,
    version: Annotated[int | None, typer.Option("--version", help="state_version you reviewed.")] = None,
    *,
    client: Client,
) -> None:
    """Approve the draft (approver role); it is then published exactly once."""
    _decide(task_id, "approve", sha, version, None, client)


@task_app.command("reject")
@api_client
def reject(
    task_id: str,
    reason: Annotated[str, typer.Option(help="Why; the draft is regenerated with it.")],
    sha: Annotated[str | None, typer.Option("--sha")] = None,
    version: Annotated[int | None, typer.Option("--version")] = None,
    *,
    client: Client,
) -> None:
    """Reject the draft with a reason (approver role); a revised draft will ask again."""
    _decide(task_id, "reject", sha, version, reason, client)


def _control(action: str, doc: str) -> None:
    """Register ``mnemo task ACTION TASK_ID``: POST /tasks/{id}/ACTION, then the task as it now is."""

    def command(task_id: str, *, client: Client) -> None:
        client.answer(client.call("POST", f"/tasks/{task_id}/{action}"), _render_task)

    command.__doc__ = doc
    task_app.command(action)(api_client(command))


_control("pause", "Pause at the next step boundary.")
_control("resume", "Resume a paused task.")
_control("cancel", "Cancel a task (refused while a publication's outcome is unknown).")


@task_app.command("resolve")
@api_client
def resolve(
    task_id: str,
    operation_id: str,
    outcome: Annotated[str, typer.Option(help="published | not_published")],
    note: Annotated[str, typer.Option(help="What you checked.")],
    *,
    client: Client,
) -> None:
    """Resolve a side effect whose outcome stayed unknown (operator role)."""
    result = client.call(
        "POST", f"/tasks/{task_id}/operations/{operation_id}/resolve", json={"outcome": outcome, "note": note}
    )
    client.answer(result, lambda r: table([r], ["operation_id", "status", "publication_id", "destination"]))


@task_app.command("types")
@api_client
def types(*, client: Client) -> None:
    """The task types you may start: mnemo's own (builtin) and your tenant's, each with its latest steps."""
    listed = client.call("GET", "/task-definitions")

    def render(d: dict[str, Any]) -> str:
        rows = [{**item, "steps": " → ".join(f"{s['step_id']} ({s['kind']})" for s in item["steps"])}
                for item in d["items"]]
        return table(rows, ["task_type", "source", "latest_version", "steps"])

    client.answer(listed, render)


@definition_app.command("put")
@api_client
def put_definition(
    task_type: str,
    file: Annotated[Path, typer.Option("--file", help="The definition, a JSON file: version, goal_schema, steps, "
                                       "redraft_step?", exists=True, dir_okay=False, readable=True)],
    *,
    client: Client,
) -> None:
    """Register a version of a task type (admin role); the same file again changes nothing."""
    body = json_file(file, "a definition")
    registered = client.call("PUT", f"/task-definitions/{task_type}", json=body)
    client.answer(
        registered,
        lambda r: f"{r['task_type']} version {r['version']} "
                  + ("was already registered with this body" if r["replayed"] else "registered")
                  + f" (sha256 {r['sha256']})",
    )


@definition_app.command("show")
@api_client
def show_definition(task_type: str, *, client: Client) -> None:
    """A task type's versions, oldest first, and the latest one's definition."""
    shown = client.call("GET", f"/task-definitions/{task_type}")

    def render(d: dict[str, Any]) -> str:
        versions = table(d["versions"], ["version", "sha256", "created_at", "created_by"])
        latest = json.dumps(d["versions"][-1]["body"], indent=2, ensure_ascii=False)
        return f"{d['task_type']} ({d['source']})\n{versions}\n\nlatest version:\n{latest}"

    client.answer(shown, render)
