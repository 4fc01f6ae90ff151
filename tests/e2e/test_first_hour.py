"""A newcomer's first hour (issue 24), end to end: ``mnemo dev`` with its demo on ports of its own, the CLI
finding it from the data dir alone, the demo's printed approve command run as printed, and a real Chromium that
opens ``/``, lands on the console and follows the task to its published report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from api.devstack.processes import free_port
from tests.console.conftest import browser, page  # noqa: F401  (the console's Chromium fixtures)
from tests.e2e.test_dev_stack import MNEMO, DevRun, Ports

pytestmark = pytest.mark.e2e

DEMO_TIMEOUT = 240.0


def _wait_for_line(run: DevRun, needle: str, timeout: float = DEMO_TIMEOUT) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.proc.poll() is None, f"`mnemo dev` exited\n{run.diagnostics()}"
        for line in run.stdout_path.read_text().splitlines():
            if needle in line:
                return line
        time.sleep(0.5)
    pytest.fail(f"`mnemo dev` never printed {needle!r}\n{run.diagnostics()}")


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MNEMO), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_a_newcomer_follows_the_demo_from_the_console_to_a_published_report(tmp_path: Path, page: Page) -> None:  # noqa: F811
    ports = Ports.pick()
    ui_port = free_port(avoid=ports.all())
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    run = DevRun(data_dir, ports, tmp_path / "out", "first-hour", demo=True,
                 env={"MNEMO_DEV_TEMPORAL_UI_PORT": str(ui_port)})
    try:
        ready = run.wait_ready()
        print(f"\n[e2e] first-hour: /readyz 200 after {ready:.1f}s")
        _wait_for_line(run, "Press Ctrl-C to stop.", timeout=30)
        out = run.stdout_path.read_text()
        assert f"console      {run.api_url}/console/" in out, out
        temporal_ui = f"http://127.0.0.1:{ui_port}/namespaces/mnemo/workflows"
        assert f"Temporal UI  {temporal_ui}" in out, out

        # The CLI finds the stack from the data dir alone (another port than 8000, another working directory).
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        found = _cli("task", "list", "--json", env={**env, "MNEMO_DATA_DIR": str(data_dir)}, cwd=elsewhere)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["items"] is not None
        # ...and an explicit setting still wins over the data dir.
        explicit = _cli("task", "list", env={**env, "MNEMO_DATA_DIR": str(data_dir), "MNEMO_API_PORT": "1"},
                        cwd=elsewhere)
        assert explicit.returncode == 1 and "cannot reach the API at http://127.0.0.1:1" in explicit.stderr
        keys = _cli("keys", "list", "--json", "--data-dir", str(data_dir), env=env, cwd=elsewhere)
        assert keys.returncode == 0, keys.stderr
        roles = {key["user_id"]: key["roles"] for key in json.loads(keys.stdout)}
        assert "public_client" not in roles["admin"] and "admin" in roles["admin"]
        assert roles["demo-approver"] == ["approver"]
        approver_key = data_dir / "approver.key"
        assert oct(approver_key.stat().st_mode & 0o777) == "0o600"

        printed = _wait_for_line(run, "approve it with: ").split("approve it with: ", 1)[1]
        task_id = re.search(r"task approve (\S+)", printed)
        assert task_id, printed
        task_id_text = task_id.group(1)

        # The Temporal UI link shows mnemo's namespace, where the demo's workflows run.
        listed = httpx.get(f"http://127.0.0.1:{ui_port}/api/v1/namespaces/mnemo/workflows", timeout=30)
        assert listed.status_code == 200 and f"task-default-{task_id_text}" in listed.text, listed.text[:500]

        # The browser opens `/` and lands on the console; the admin (the task's owner) is told why not to approve.
        admin_key = (data_dir / "admin.key").read_text().strip()
        page.goto(f"{run.api_url}/")
        assert page.url.startswith(f"{run.api_url}/console/login")
        page.fill("#api_key", admin_key)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{run.api_url}/console/tasks/{task_id_text}")
        assert page.locator("#approve").count() == 0
        assert "another approver must decide" in page.inner_text("#why-not-decide")

        # The printed command, run as printed in the directory `mnemo dev` ran in, approves the draft.
        approved = subprocess.run(printed, shell=True, capture_output=True, text=True, cwd=run.log_dir,
                                  env={**env, "PATH": os.environ.get("PATH", "")}, timeout=120)
        assert approved.returncode == 0, f"{printed}\n{approved.stdout}\n{approved.stderr}"
        assert "approved: task is READY" in approved.stdout

        deadline = time.monotonic() + 120
        while page.inner_text("#task-status") != "SUCCEEDED":
            assert time.monotonic() < deadline, run.diagnostics()
            time.sleep(1)
            page.reload()
        with page.expect_navigation():  # the title is read once the report has loaded
            page.click("#report-link")
        assert page.title() == "Monthly sales report 2026-06 (CNY)"
        assert page.evaluate("[...document.images].every(i => i.naturalWidth > 0)")
    finally:
        run.cleanup()
