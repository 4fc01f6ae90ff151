"""What ``mnemo dev`` shows of durable tasks: one monthly report, run up to its approval wait."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from api.cli.hints import mnemo_hint, shown
from memory.reports import MONTHLY_REPORT

DEMO_TASK = {
    "task_type": MONTHLY_REPORT,
    "request_intent_id": "mnemo-dev-demo-report-2026-06",
    "goal": {"month": "2026-06", "currency": "CNY"},
}


def run_task_demo(
    api_url: str, api_key: str, *, approver_key: Path, data_dir: Path | None = None, timeout: float = 180.0
) -> None:
    """Idempotent: the sample data loads once and the same intent id names the same task every time. The task is
    ``api_key``'s, so its approval hint names another person's key, ``approver_key`` (separation of duties)."""
    try:
        _run(api_url, api_key, approver_key, data_dir, timeout)
    except httpx.HTTPError as exc:
        print(f"demo: the report task demo failed: {exc}")


def _run(api_url: str, api_key: str, approver_key: Path, data_dir: Path | None, timeout: float) -> None:
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=api_url, headers=headers, timeout=120) as client:
        seeded = client.post("/report-data/sample", json={})
        seeded.raise_for_status()
        print(f"demo: sales data ready ({seeded.json()['tenant_lines']} order lines)")
        started = client.post("/tasks", json=DEMO_TASK)
        started.raise_for_status()
        task = started.json()
        task_id = task["task_id"]
        print(f"demo: report task {task_id} {'resumed' if task['replayed'] else 'started'} ({task['workflow_id']})")
        seen: set[str] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = client.get(f"/tasks/{task_id}")
            view.raise_for_status()
            state = view.json()
            for step in state.get("completed_step_ids") or []:
                if step not in seen:
                    seen.add(step)
                    print(f"  ✓ {step}")
            if state["status"] not in ("CREATED", "READY", "RUNNING", "PAUSED"):
                break
            time.sleep(0.3)
        else:
            print(f"demo: the task is still {state['status']} after {timeout:.0f}s; see "
                  f"`{mnemo_hint('task', 'show', task_id, data_dir=data_dir)}`")
            return
        pending = state.get("pending_approval")
        print(f"demo: task is {state['status']} (state_version {state['state_version']})")
        if pending:
            print(f"  draft {pending['artifact_sha256']}")
            if pending.get("summary"):
                print(f"  {pending['summary']}")
            approve = mnemo_hint("task", "approve", task_id, "--key-file", shown(approver_key), data_dir=data_dir)
            print("  the task is yours (the admin key's), so another person approves it: the demo's approver")
            print(f"  approve it with: {approve}")
            print(f"  or sign in at {api_url}/console/tasks/{task_id} with the key in {shown(approver_key)}")
