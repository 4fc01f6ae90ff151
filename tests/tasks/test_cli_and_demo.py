"""``mnemo task`` and the dev demo against a real HTTP server (uvicorn in a thread)."""

from __future__ import annotations

import json
import shlex
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine
from typer.testing import CliRunner

from api.cli.demo.task import run_task_demo
from api.cli.task import task_app
from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey
from tests.tasks.conftest import SMALL_DATASET, Team
from tests.workers import ThreadWorker


@pytest.fixture(scope="module")
def api_url(settings: Settings, task_worker: ThreadWorker) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code < 500:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield url
    server.should_exit = True
    thread.join(10)


def _run(api_url: str, key: str, *args: str) -> str:
    result = CliRunner().invoke(task_app, [*args, "--api-url", api_url, "--key", key])
    assert result.exit_code == 0, result.output
    return result.output


def _wait(api_url: str, key: str, task_id: str, status: str) -> dict[str, object]:
    for _ in range(300):
        view = json.loads(_run(api_url, key, "show", task_id, "--json"))
        if view["status"] == status:
            return dict(view)
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} never reached {status}: {view}")


def test_the_task_commands_drive_a_report_to_publication(api_url: str, team: Team) -> None:
    started = json.loads(_run(api_url, team.owner, "start", "--month", "2026-05", "--currency", "EUR", "--json"))
    again = _run(api_url, team.owner, "start", "--month", "2026-05", "--currency", "EUR")
    assert f"task {started['task_id']}" in again and "already existed" in again
    task_id = started["task_id"]
    view = _wait(api_url, team.owner, task_id, "WAITING_FOR_APPROVAL")

    listed = _run(api_url, team.owner, "list")
    assert listed.splitlines()[0].split() == [
        "TASK_ID",
        "STATUS",
        "CURRENT_STEP_ID",
        "STATE_VERSION",
        "OWNER_USER_ID",
        "UPDATED_AT",
    ]
    assert any(line.startswith(task_id) and "WAITING_FOR_APPROVAL" in line for line in listed.splitlines())
    shown = _run(api_url, team.owner, "show", task_id)
    assert f"awaiting approval draft {view['draft_sha256']}" in shown

    refused = CliRunner().invoke(task_app, ["approve", task_id, "--api-url", api_url, "--key", team.owner])
    assert refused.exit_code == 1 and "approver role" in refused.output
    first_draft = view["draft_sha256"]
    rejected = _run(api_url, team.approver, "reject", task_id, "--reason", "Show EUR amounts with two decimals")
    assert "rejected: task is RUNNING" in rejected
    for _ in range(300):
        view = json.loads(_run(api_url, team.owner, "show", task_id, "--json"))
        if view["status"] == "WAITING_FOR_APPROVAL" and view["draft_sha256"] != first_draft:
            break
        time.sleep(0.1)
    approved = _run(api_url, team.approver, "approve", task_id)
    assert "approved: task is READY" in approved
    _wait(api_url, team.owner, task_id, "SUCCEEDED")
    timeline = _run(api_url, team.owner, "show", task_id, "--timeline")
    assert "published" in timeline and "operation" in timeline and "run " in timeline


def test_the_dev_demo_runs_a_report_up_to_the_approval_wait_and_its_printed_command_approves_it(
    api_url: str, make_key: MakeKey, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's task is its admin's, who may not approve it (separation of duties): the printed command names
    the demo approver's key file, and run as printed it approves the draft (issue 24, item 2)."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, roles=("admin",))
    approver_key = tmp_path / "approver.key"
    approver_key.write_text(make_key(tenant=tenant, user="demo-approver", roles=("approver",)) + "\n")
    with tenant_session(engine, tenant) as session:  # the small dataset: the demo loads the full one only once
        seed_sales(session, tenant, total=SMALL_DATASET)
    run_task_demo(api_url, admin, approver_key=approver_key)
    out = capsys.readouterr().out
    assert f"demo: sales data ready ({SMALL_DATASET} order lines)" in out
    for step in ("load_data", "validate_data", "calculate_metrics", "generate_charts", "generate_draft"):
        assert f"  ✓ {step}" in out
    assert "demo: task is WAITING_FOR_APPROVAL" in out
    printed = next(line for line in out.splitlines() if "approve it with: " in line).split("approve it with: ")[1]
    words = shlex.split(printed)
    assert words[1:3] == ["task", "approve"] and words[-2:] == ["--key-file", str(approver_key)], printed
    as_admin = CliRunner().invoke(task_app, [*words[2:-2], "--api-url", api_url, "--key", admin])
    assert as_admin.exit_code == 1 and "separation_of_duties" in as_admin.output  # why the demo names another key
    approved = CliRunner().invoke(task_app, [*words[2:], "--api-url", api_url])
    assert approved.exit_code == 0 and "approved: task is READY" in approved.output, approved.output
    run_task_demo(api_url, admin, approver_key=approver_key)
    assert "resumed" in capsys.readouterr().out
