"""``mnemo task …``: start, list, show, approve, reject, pause, resume, cancel and resolve report tasks.

It talks to the HTTP API with an API key, like any other client (:mod:`api.cli_http`: ``--api-url``, ``--key`` or
``--key-file``, else the running ``mnemo dev`` of ``--data-dir`` and its admin key). Tables for people, ``--json``
for scripts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli_http import ApiUrl, DataDir, Json, Key, KeyFile, call, connection, fail, print_answer
from memory.reports.definitions import MONTHLY_REPORT

task_app = typer.Typer(help="Durable report tasks.", no_args_is_help=True)

Conn = tuple[str | None, str | None, Path | None, Path]
"""The connection options of a command: --api-url, --key, --key-file, --data-dir."""


def _call(method: str, path: str, conn: Conn, **kwargs: Any) -> Any:
    return call(connection(*conn), method, path, **kwargs)


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Left-aligned columns sized to their content; None prints as '-'."""
    cells = [[("-" if row.get(c) is None else str(row.get(c))) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


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
def start(
    month: Annotated[str, typer.Option(help="Report month, YYYY-MM.")],
    currency: Annotated[str, typer.Option(help=f"Report currency ({', '.join(MONTHLY_REPORT.currencies)}).")] = "CNY",
    intent: Annotated[str | None, typer.Option(help="request_intent_id; the same one names the same task.")] = None,
    destination: Annotated[str, typer.Option(help="Publication destination.")] = "reports",
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """Start a monthly report task (idempotent: re-running it returns the same task)."""
    body = {
        "task_type": MONTHLY_REPORT.task_type,
        "request_intent_id": intent or f"cli-{MONTHLY_REPORT.task_type}-{month}-{currency}",
        "goal": {"month": month, "currency": currency},
        "destination": destination,
    }
    created = _call("POST", "/tasks", (api_url, key, key_file, data_dir), json=body)
    print_answer(
        created,
        as_json,
        lambda c: (
            f"task {c['task_id']} {c['status']} (state_version {c['state_version']})"
            + (" — already existed" if c.get("replayed") else "")
        ),
    )


@task_app.command("list")
def list_tasks(
    status: Annotated[str | None, typer.Option(help="Only tasks in this status.")] = None,
    all_users: Annotated[bool, typer.Option("--all", help="Every user's tasks (approver/operator/auditor).")] = False,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """Your tasks (or everyone's with --all), most recently changed first."""
    params = {"owner": "all" if all_users else "me", **({"status": status} if status else {})}
    listed = _call("GET", "/tasks", (api_url, key, key_file, data_dir), params=params)
    columns = ["task_id", "status", "current_step_id", "state_version", "owner_user_id", "updated_at"]
    print_answer(listed, as_json, lambda d: table(d["items"], columns) if d["items"] else "no tasks")


@task_app.command("show")
def show(
    task_id: str,
    timeline: Annotated[
        bool, typer.Option("--timeline", help="Also print attempts, checkpoints, approvals, operations.")
    ] = False,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """A task's live state (and its timeline)."""
    conn = connection(api_url, key, key_file, data_dir)
    view = call(conn, "GET", f"/tasks/{task_id}")
    if view.get("publications"):
        # What a person can open: the console's page of the published report (sign in with a key).
        view["report_url"] = f"{conn.api_url}/console/tasks/{task_id}/report"
    if timeline:
        view["timeline"] = call(conn, "GET", f"/tasks/{task_id}/timeline")

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

    print_answer(view, as_json, render)


def _decide(
    task_id: str,
    decision: str,
    sha: str | None,
    version: int | None,
    reason: str | None,
    conn: Conn,
    as_json: bool,
) -> None:
    if sha is None or version is None:
        view = _call("GET", f"/tasks/{task_id}", conn)
        pending = view.get("pending_approval")
        if not pending:
            fail(f"task {task_id} is {view['status']}, not waiting for approval")
        sha = sha or pending["artifact_sha256"]
        version = view["state_version"] if version is None else version
        if not as_json:
            typer.echo(f"{decision} draft {sha} at state_version {version}: {pending.get('summary', '')}")
    body: dict[str, Any] = {"decision": decision, "artifact_sha256": sha, "state_version": version}
    if reason:
        body["reason"] = reason
    result = _call("POST", f"/tasks/{task_id}/approvals", conn, json=body)
    print_answer(
        result,
        as_json,
        lambda r: (
            f"{'approved' if r['decision'] == 'approve' else 'rejected'}: "
            f"task is {r['status']} (state_version {r['state_version']})"
            + (" — already recorded" if r.get("replayed") else "")
        ),
    )


@task_app.command("approve")
def approve(
    task_id: str,
    sha: Annotated[
        str | None, typer.Option("--sha", help="Draft sha256 you reviewed (default: the current draft).")
    ] = None,
    version: Annotated[int | None, typer.Option("--version", help="state_version you reviewed.")] = None,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """Approve the draft (approver role); it is then published exactly once."""
    _decide(task_id, "approve", sha, version, None, (api_url, key, key_file, data_dir), as_json)


@task_app.command("reject")
def reject(
    task_id: str,
    reason: Annotated[str, typer.Option(help="Why; the draft is regenerated with it.")],
    sha: Annotated[str | None, typer.Option("--sha")] = None,
    version: Annotated[int | None, typer.Option("--version")] = None,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """Reject the draft with a reason (approver role); a revised draft will ask again."""
    _decide(task_id, "reject", sha, version, reason, (api_url, key, key_file, data_dir), as_json)


def _control(action: str, task_id: str, conn: Conn, as_json: bool) -> None:
    view = _call("POST", f"/tasks/{task_id}/{action}", conn)
    print_answer(view, as_json, _render_task)


@task_app.command("pause")
def pause(
    task_id: str, api_url: ApiUrl = None, key: Key = None, key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"), as_json: Json = False
) -> None:
    """Pause at the next step boundary."""
    _control("pause", task_id, (api_url, key, key_file, data_dir), as_json)


@task_app.command("resume")
def resume(
    task_id: str, api_url: ApiUrl = None, key: Key = None, key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"), as_json: Json = False
) -> None:
    """Resume a paused task."""
    _control("resume", task_id, (api_url, key, key_file, data_dir), as_json)


@task_app.command("cancel")
def cancel(
    task_id: str, api_url: ApiUrl = None, key: Key = None, key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"), as_json: Json = False
) -> None:
    """Cancel a task (refused while a publication's outcome is unknown)."""
    _control("cancel", task_id, (api_url, key, key_file, data_dir), as_json)


@task_app.command("resolve")
def resolve(
    task_id: str,
    operation_id: str,
    outcome: Annotated[str, typer.Option(help="published | not_published")],
    note: Annotated[str, typer.Option(help="What you checked.")],
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """Resolve a side effect whose outcome stayed unknown (operator role)."""
    result = _call(
        "POST",
        f"/tasks/{task_id}/operations/{operation_id}/resolve",
        (api_url, key, key_file, data_dir),
        json={"outcome": outcome, "note": note},
    )
    print_answer(result, as_json, lambda r: table([r], ["operation_id", "status", "publication_id", "destination"]))
