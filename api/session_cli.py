"""``mnemo session …``: post messages, read the context window, commit a stage, show a session or a commit.

It talks to the HTTP API with an API key, like any other client: ``--api-url`` (or MNEMO_API_URL; default
``http://MNEMO_API_HOST:MNEMO_API_PORT``, where ``mnemo dev`` and ``mnemo api`` listen) and ``--key`` (or
MNEMO_API_KEY), else the key in ``--key-file`` (default ``<data-dir>/admin.key``, the admin key ``mnemo dev``
writes). Tables for people, ``--json`` for scripts; errors as ``mnemo: message (code, HTTP status)``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import httpx
import typer

from api.settings import Settings
from api.task_cli import table

session_app = typer.Typer(help="Sessions: messages, context windows, commits into memory.", no_args_is_help=True)

TERMINAL = frozenset({"completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion"})
"""The statuses a commit ends in; ``--wait`` polls until one of them."""
PROGRESS_EVERY_SECONDS = 5.0
"""``--wait`` says on stderr what the commit is doing when it changes, and at least this often."""
CONTENT_WIDTH = 60
SUMMARY_SECTIONS = ("goal", "facts", "decisions", "constraints", "completed", "pending", "unknowns", "errors")

ApiUrl = Annotated[
    str | None,
    typer.Option("--api-url", envvar="MNEMO_API_URL", help="mnemo API base URL (default: MNEMO_API_HOST:PORT)."),
]
Key = Annotated[str | None, typer.Option("--key", envvar="MNEMO_API_KEY", help="API key (mnemo_...).")]
KeyFile = Annotated[
    Path | None, typer.Option("--key-file", help="File holding the API key (default: <data-dir>/admin.key).")
]
DataDir = Annotated[
    Path, typer.Option("--data-dir", envvar="MNEMO_DATA_DIR", help="Data dir of a running `mnemo dev`.")
]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")]


def _fail(message: str) -> NoReturn:
    typer.echo(f"mnemo: {message}", err=True)
    raise typer.Exit(1)


@dataclass(frozen=True)
class Connection:
    api_url: str
    key: str


def _connection(api_url: str | None, key: str | None, key_file: Path | None, data_dir: Path) -> Connection:
    """Where the API is and which key to send: the options, else the settings' address and the key file."""
    settings = Settings()
    url = (api_url or f"http://{settings.api_host}:{settings.api_port}").rstrip("/")
    if key:
        return Connection(url, key)
    path = key_file or data_dir / "admin.key"
    if not path.is_file():
        _fail(f"no API key: {path} does not exist (pass --key or --key-file, or start `mnemo dev`)")
    secret = path.read_text().strip()
    if not secret:
        _fail(f"no API key: {path} is empty")
    return Connection(url, secret)


def _call(conn: Connection, method: str, path: str, *, missing_ok: bool = False, **kwargs: Any) -> Any:
    """The API's JSON answer; a 404 is None when ``missing_ok``; any other error ends the command."""
    try:
        response = httpx.request(
            method, conn.api_url + path, headers={"Authorization": f"Bearer {conn.key}"}, timeout=60, **kwargs
        )
    except httpx.HTTPError as exc:
        _fail(f"cannot reach the API at {conn.api_url}: {exc}")
    if response.status_code == 404 and missing_ok:
        return None
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
            message, code = error["message"], error["code"]
        except (ValueError, KeyError, TypeError):
            _fail(f"HTTP {response.status_code}: {response.text[:300]}")
        _fail(f"{message} ({code}, HTTP {response.status_code})")
    return response.json()


def _print(data: Any, as_json: bool, render: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False) if as_json else render(data))


def _short(text: Any, width: int = CONTENT_WIDTH) -> str:
    """One line of at most ``width`` characters (a table cell)."""
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _fields(view: dict[str, Any], names: list[str]) -> list[str]:
    return [f"{name:<18} {'-' if view.get(name) is None else view[name]}" for name in names]


def _state_lines(state: dict[str, Any]) -> list[str]:
    """The session state's non-empty parts (active task, entities, temporary constraints, questions)."""
    return [f"{'state.' + name:<18} {json.dumps(value, ensure_ascii=False)}"
            for name, value in state.items() if value not in (None, [], {})]


# --------------------------------------------------------------- messages ---


def _read_messages(file: Path | None, user: list[str]) -> list[dict[str, Any]]:
    """The messages to post: a file's (the API's format, sent as written) or one user message per ``--user``."""
    if (file is None) == (not user):
        _fail("give either --file or one or more --user, not both and not neither")
    if file is None:
        now = datetime.now(UTC).isoformat()
        return [{"idempotency_key": f"cli-{uuid.uuid4().hex}", "role": "user", "content": text, "created_at": now}
                for text in user]
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        _fail(f"cannot read {file}: {exc}")
    found = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(found, list) or not all(isinstance(m, dict) for m in found):
        _fail(f'{file} must hold a list of messages or {{"messages": [...]}}')
    return found


@session_app.command("messages")
def messages(
    session_id: str,
    file: Annotated[
        Path | None, typer.Option("--file", help='JSON: a list of messages or {"messages": [...]}, as the API takes.')
    ] = None,
    user: Annotated[list[str] | None, typer.Option("--user", help="A user message (repeat for several).")] = None,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """Post messages to a session (opened first if it does not exist yet); a replayed message is marked."""
    conn = _connection(api_url, key, key_file, data_dir)
    sent = _read_messages(file, user or [])
    if _call(conn, "GET", f"/sessions/{session_id}", missing_ok=True) is None:
        _call(conn, "POST", "/sessions", json={"session_id": session_id})
        typer.echo(f"mnemo: opened session {session_id}", err=True)
    stored = _call(conn, "POST", f"/sessions/{session_id}/messages", json={"messages": sent})

    def render(answer: dict[str, Any]) -> str:
        rows = [{**event, "role": message.get("role"), "content": _short(message.get("content", ""))}
                for event, message in zip(answer["events"], sent, strict=True)]
        text = table(rows, ["sequence_no", "role", "replayed", "event_id", "content"])
        remembered = answer.get("remembered") or []
        if remembered:
            text += "\n\nremembered at once (the message asked to):\n" + table(
                [{**m, "abstract": _short(m.get("abstract", ""))} for m in remembered],
                ["memory_id", "category", "key", "source_level", "abstract"],
            )
        return text

    _print(stored, as_json, render)


# ----------------------------------------------------------------- window ---


def _render_window(window: dict[str, Any]) -> str:
    out = [f"{window['tokens']} of {window['budget_tokens']} tokens: {len(window['messages'])} messages, "
           f"{len(window.get('profile') or [])} profile entries, {len(window['dropped'])} dropped"]
    if window.get("profile"):
        rows = [{**p, "content": _short(p.get("content", ""))} for p in window["profile"]]
        out += ["", "profile:", table(rows, ["memory_id", "category", "key", "tokens", "content"])]
    rows = [{**m, "content": _short(m["content"])} for m in window["messages"]]
    out += ["", table(rows, ["sequence_no", "priority", "role", "tokens", "content"]) if rows else "no message fits"]
    if window["dropped"]:
        out += ["", "dropped:", table(window["dropped"], ["sequence_no", "priority", "reason"])]
    state = _state_lines(window.get("state") or {})
    return "\n".join([*out, *(["", *state] if state else [])])


@session_app.command("window")
def window(
    session_id: str,
    budget: Annotated[int, typer.Option("--budget", min=1, help="Token budget of the window.")] = 4_000,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """The messages the model would get within the budget, by priority then recency, and what was dropped."""
    conn = _connection(api_url, key, key_file, data_dir)
    found = _call(conn, "GET", f"/sessions/{session_id}/window", params={"budget_tokens": budget})
    _print(found, as_json, _render_window)


# ----------------------------------------------------------------- commit ---


def _render_commit(commit: dict[str, Any]) -> str:
    span = commit.get("sequence_range") or {}
    out = _fields(commit, ["commit_id", "status", "workflow_id", "summary_id"])
    out.append(f"{'messages':<18} {span.get('from', '-')}–{span.get('to', '-')}")
    stats = commit.get("stats") or {}
    if stats:
        out.append(f"{'stats':<18} " + ", ".join(
            f"{name} {value}" for name, value in stats.items() if value is not None and not isinstance(value, dict)
        ))
        if stats.get("rejected"):
            out.append(f"{'refused':<18} " + ", ".join(f"{r} {n}" for r, n in stats["rejected"].items()))
    memories = commit.get("memories") or {}
    rows = [{**entry, "decision": decision, "abstract": _short(entry.get("abstract", ""), 50)}
            for decision in ("created", "merged", "skipped") for entry in memories.get(decision, [])]
    if rows:
        out += ["", table(rows, ["decision", "category", "key", "source_level", "status", "memory_id", "abstract"])]
    if commit.get("reasons"):
        out += ["", "reasons:", table([{**r, "detail": _short(r.get("detail", ""), 80)} for r in commit["reasons"]],
                                      ["reason", "detail"])]
    return "\n".join(out)


@session_app.command("commit")
def commit(
    session_id: str,
    commit_id: Annotated[
        str | None, typer.Option("--commit-id", help="Idempotency id; the same one names the same commit.")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the commit's end and show what it stored.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds --wait waits at most.")] = 300,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """Commit the messages since the last commit: archive them, extract memories (a workflow)."""
    conn = _connection(api_url, key, key_file, data_dir)
    chosen = commit_id or f"c-{uuid.uuid4().hex[:12]}"
    accepted = _call(conn, "POST", f"/sessions/{session_id}/commit", json={"commit_id": chosen})
    if not wait:
        _print(accepted, as_json, lambda a: (
            f"commit {a['commit_id']} {a['status']}: messages {a['sequence_range']['from']}–"
            f"{a['sequence_range']['to']}, workflow {a['workflow_id']}"
            + (" — already accepted" if a.get("replayed") else "")
        ))
        return
    started = time.monotonic()
    deadline, said, last = started + timeout, started, ""
    while True:
        view = _call(conn, "GET", f"/sessions/{session_id}/commits/{chosen}")
        if view["status"] in TERMINAL:
            break
        now = time.monotonic()
        if now > deadline:
            _fail(f"commit {chosen} is still {view['status']} after {timeout:g}s (see `mnemo session show "
                  f"{session_id} --commit {chosen}`)")
        if view["status"] != last or now - said >= PROGRESS_EVERY_SECONDS:  # long work shows progress
            typer.echo(f"commit {chosen}: {view['status']} ({now - started:.0f}s)", err=True)
            said, last = now, view["status"]
        time.sleep(0.2)
    _print(view, as_json, _render_commit)


# ------------------------------------------------------------------- show ---


def _render_summary(summary: dict[str, Any]) -> list[str]:
    span = summary["source_range"]
    out = [f"summary v{summary['version']} (messages {span['from']}–{span['to']}): {summary.get('abstract', '')}"]
    for name in SUMMARY_SECTIONS:
        for item in summary.get(name) or []:
            out.append(f"  {name:<12} {_short(item['text'], 90)}")
    return out


def _render_session(view: dict[str, Any]) -> str:
    out = _fields(view, ["session_id", "status", "title", "project_id", "task_id", "agent_id", "created_at",
                         "last_message_at", "messages", "committed_through"])
    out += _state_lines(view.get("state") or {})
    if view.get("profile"):
        rows = [{**p, "content": _short(p.get("content", ""))} for p in view["profile"]]
        out += ["", "profile:", table(rows, ["memory_id", "category", "key", "content"])]
    summary = view.get("summary")
    out += ["", *(_render_summary(summary) if summary else ["no summary yet (commit a stage first)"])]
    return "\n".join(out)


@session_app.command("show")
def show(
    session_id: str,
    commit_id: Annotated[str | None, typer.Option("--commit", help="Show this commit of the session instead.")] = None,
    api_url: ApiUrl = None,
    key: Key = None,
    key_file: KeyFile = None,
    data_dir: DataDir = Path(".mnemo"),
    as_json: Json = False,
) -> None:
    """A session's state, profile and latest summary; or, with --commit, what that commit stored and refused."""
    conn = _connection(api_url, key, key_file, data_dir)
    if commit_id is not None:
        _print(_call(conn, "GET", f"/sessions/{session_id}/commits/{commit_id}"), as_json, _render_commit)
        return
    view = _call(conn, "GET", f"/sessions/{session_id}")
    view["summary"] = _call(conn, "GET", f"/sessions/{session_id}/summaries/latest", missing_ok=True)
    _print(view, as_json, _render_session)
