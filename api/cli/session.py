"""``mnemo session …``: post messages, read the context window, commit a stage, show a session or a commit.

It talks to the HTTP API with an API key, like any other client (:mod:`api.cli.http`). Tables for people,
``--json`` for scripts.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.hints import mnemo_hint
from api.cli.options import Client, api_client
from api.cli.output import fail, table

session_app = typer.Typer(help="Sessions: messages, context windows, commits into memory.", no_args_is_help=True)

TERMINAL = frozenset({"completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion"})
"""The statuses a commit ends in; ``--wait`` polls until one of them."""
PROGRESS_EVERY_SECONDS = 5.0
"""``--wait`` says on stderr what the commit is doing when it changes, and at least this often."""
CONTENT_WIDTH = 60
SUMMARY_SECTIONS = ("goal", "facts", "decisions", "constraints", "completed", "pending", "unknowns", "errors")


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
        fail("give either --file or one or more --user, not both and not neither")
    if file is None:
        now = datetime.now(UTC).isoformat()
        return [{"idempotency_key": f"cli-{uuid.uuid4().hex}", "role": "user", "content": text, "created_at": now}
                for text in user]
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        fail(f"cannot read {file}: {exc}")
    found = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(found, list) or not all(isinstance(m, dict) for m in found):
        fail(f'{file} must hold a list of messages or {{"messages": [...]}}')
    return found


@session_app.command("messages")
@api_client
def messages(
    session_id: str,
    file: Annotated[
        Path | None, typer.Option("--file", help='JSON: a list of messages or {"messages": [...]}, as the API takes.')
    ] = None,
    user: Annotated[list[str] | None, typer.Option("--user", help="A user message (repeat for several).")] = None,
    *,
    client: Client,
) -> None:
    """Post messages to a session (opened first if it does not exist yet); a replayed message is marked."""
    sent = _read_messages(file, user or [])
    if client.call("GET", f"/sessions/{session_id}", missing_ok=True) is None:
        client.call("POST", "/sessions", json={"session_id": session_id})
        typer.echo(f"mnemo: opened session {session_id}", err=True)
    stored = client.call("POST", f"/sessions/{session_id}/messages", json={"messages": sent})

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

    client.answer(stored, render)


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
@api_client
def window(
    session_id: str,
    budget: Annotated[int, typer.Option("--budget", min=1, help="Token budget of the window.")] = 4_000,
    *,
    client: Client,
) -> None:
    """The messages the model would get within the budget, by priority then recency, and what was dropped."""
    found = client.call("GET", f"/sessions/{session_id}/window", params={"budget_tokens": budget})
    client.answer(found, _render_window)


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
@api_client
def commit(
    session_id: str,
    commit_id: Annotated[
        str | None, typer.Option("--commit-id", help="Idempotency id; the same one names the same commit.")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the commit's end and show what it stored.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds --wait waits at most.")] = 300,
    *,
    client: Client,
) -> None:
    """Commit the messages since the last commit: archive them, extract memories (a workflow)."""
    chosen = commit_id or f"c-{uuid.uuid4().hex[:12]}"
    accepted = client.call("POST", f"/sessions/{session_id}/commit", json={"commit_id": chosen})
    if not wait:
        client.answer(accepted, lambda a: (
            f"commit {a['commit_id']} {a['status']}: messages {a['sequence_range']['from']}–"
            f"{a['sequence_range']['to']}, workflow {a['workflow_id']}"
            + (" — already accepted" if a.get("replayed") else "")
        ))
        return
    started = time.monotonic()
    deadline, said, last = started + timeout, started, ""
    while True:
        view = client.call("GET", f"/sessions/{session_id}/commits/{chosen}")
        if view["status"] in TERMINAL:
            break
        now = time.monotonic()
        if now > deadline:
            follow = mnemo_hint("session", "show", session_id, "--commit", chosen, data_dir=client.data_dir)
            fail(f"commit {chosen} is still {view['status']} after {timeout:g}s (see `{follow}`)")
        if view["status"] != last or now - said >= PROGRESS_EVERY_SECONDS:  # long work shows progress
            typer.echo(f"commit {chosen}: {view['status']} ({now - started:.0f}s)", err=True)
            said, last = now, view["status"]
        time.sleep(0.2)
    client.answer(view, _render_commit)


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
@api_client
def show(
    session_id: str,
    commit_id: Annotated[str | None, typer.Option("--commit", help="Show this commit of the session instead.")] = None,
    *,
    client: Client,
) -> None:
    """A session's state, profile and latest summary; or, with --commit, what that commit stored and refused."""
    if commit_id is not None:
        client.answer(client.call("GET", f"/sessions/{session_id}/commits/{commit_id}"), _render_commit)
        return
    view = client.call("GET", f"/sessions/{session_id}")
    view["summary"] = client.call("GET", f"/sessions/{session_id}/summaries/latest", missing_ok=True)
    client.answer(view, _render_session)
