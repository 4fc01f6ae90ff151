"""What ``mnemo dev`` shows of sessions: a short bilingual conversation, committed, and what it remembered and why."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import httpx2

from api.cli.hints import mnemo_hint

DEMO_SESSION = "mnemo-dev-demo-session"
DEMO_COMMIT = "mnemo-dev-demo-commit"
DEMO_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "我住在上海，平时用中文交流。"},
    {"role": "assistant", "content": "好的，我记下了。需要我做什么？"},
    {"role": "user", "content": "I prefer plain text answers, no markdown please."},
    {"role": "user", "content": "这次用英文回答。"},
    {"role": "user", "content": "报告草稿已经生成，但尚未审批，也没有发布。"},
    {"role": "assistant", "content": "看起来你更喜欢简短的回答。"},
]
TERMINAL = ("completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion")


def _messages() -> dict[str, Any]:
    return {"messages": [
        {**message, "idempotency_key": f"mnemo-dev-demo-message-{n}", "created_at": f"2026-07-14T14:0{n}:00+08:00"}
        for n, message in enumerate(DEMO_MESSAGES)
    ]}


def session_demo(
    client: httpx.Client | httpx2.Client, timeout: float = 60.0, data_dir: Path | None = None
) -> dict[str, Any]:
    """Post the demo conversation (idempotent), commit it, wait, and print what was remembered and why."""
    client.post("/sessions", json={"session_id": DEMO_SESSION, "title": "mnemo dev demo"}).raise_for_status()
    client.post(f"/sessions/{DEMO_SESSION}/messages", json=_messages()).raise_for_status()
    accepted = client.post(f"/sessions/{DEMO_SESSION}/commit", json={"commit_id": DEMO_COMMIT})
    if accepted.status_code == 409:  # an earlier run committed these messages under another id
        print("demo: the demo session was committed before")
        return {}
    accepted.raise_for_status()
    deadline = time.monotonic() + timeout
    while True:
        commit: dict[str, Any] = client.get(f"/sessions/{DEMO_SESSION}/commits/{DEMO_COMMIT}").json()
        if commit["status"] in TERMINAL or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    if commit["status"] not in TERMINAL:
        follow = mnemo_hint("session", "show", DEMO_SESSION, "--commit", DEMO_COMMIT, data_dir=data_dir)
        print(f"demo: the session commit is still {commit['status']} after {timeout:.0f}s; follow it with `{follow}`")
        return commit
    kinds = commit["stats"].get("rejected_by_kind", {})
    refusals = f"; refused by rule, as intended: {kinds['rule']}" if kinds.get("rule") else ""
    failures = f"; extractor schema failures: {kinds['schema']}" if kinds.get("schema") else ""
    print(f"demo: session commit {commit['status']} ({commit['stats'].get('messages', 0)} messages{refusals}"
          f"{failures})")
    for decision in ("created", "merged", "skipped"):
        for memory in commit["memories"].get(decision, []):
            status = f" {memory['status']}" if memory.get("status") else ""
            print(f"  {decision:<8} {memory['category']:<10} {memory['source_level']}{status}  {memory['abstract']}"
                  f"  ← {', '.join(memory['evidence_refs'])} ({memory['reason']})")
    for reason in commit["reasons"]:
        print(f"  refused  {reason['reason']}: {reason['detail']}")
    summary = client.get(f"/sessions/{DEMO_SESSION}/summaries/latest")
    if summary.status_code == 200:
        print(f"  summary  {summary.json()['abstract']}")
    return commit
