"""Screenshots of the console's main pages into docs/console/, from a real `mnemo dev` and its demo.

    .venv/bin/python scripts/console_screenshots.py [--out docs/console]

Starts `mnemo dev` in a temporary data directory on free ports, waits for it to be ready and for the
demo's report task to wait for approval, then drives Debian's headless Chromium (scripts/ensure-browser)
through the pages as the dev stack's admin, on a laptop-sized and a phone-sized screen.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, ViewportSize, sync_playwright

from api.devstack.processes import free_port

LAPTOP = ViewportSize(width=1280, height=900)
PHONE = ViewportSize(width=390, height=844)


def _wait(what: str, check: Any, timeout: float = 600) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except httpx.HTTPError:
            found = None
        if found:
            return found
        time.sleep(1)
    raise SystemExit(f"console_screenshots: {what} did not happen within {timeout:.0f}s")


def _prepare(api: httpx.Client) -> dict[str, str]:
    """The demo's waiting task, plus a memory recalled (for 'why was this used') and one deleted (a job)."""
    def waiting() -> str | None:
        items = api.get("/tasks", params={"owner": "all", "status": "WAITING_FOR_APPROVAL"}).json()["items"]
        return str(items[0]["task_id"]) if items else None

    task_id = _wait("the demo's report task waiting for approval", waiting)
    source = {"source_id": "console-shots", "source_type": "EXPLICIT_USER_STATEMENT",
              "captured_at": "2026-06-01T09:00:00Z"}
    kept = api.post("/memory-candidates", json={"category": "PROFILE", "space": "USER",
                                                "content": "我在杭州的数据平台团队工作", "source": source,
                                                "source_level": "E2"}).json()
    recalled = api.post("/memory-query", json={"query": "杭州 数据平台团队", "retrieval": "lexical"}).json()
    if not any(item["memory_id"] == kept["memory_id"] for item in recalled["items"]):
        raise SystemExit("console_screenshots: the recall did not select the memory the pages show")
    gone = api.post("/memory-candidates", json={"category": "PROFILE", "space": "USER",
                                                "content": "My old phone number ends in 42", "source": source,
                                                "source_level": "E2"}).json()
    job = api.delete(f"/memories/{gone['memory_id']}").json()
    _wait("the deletion job to complete",
          lambda: api.get(f"/memory-deletions/{job['job_id']}").json()["status"] == "completed", timeout=120)
    return {"task_id": task_id, "memory_id": str(kept["memory_id"]), "job_id": str(job["job_id"])}


def _shoot(page: Page, url: str, out: Path, name: str, *, full_page: bool = True) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / f"{name}.png"), full_page=full_page)
    print(f"console_screenshots: {out / name}.png", flush=True)


def _browse(base: str, key: str, ids: dict[str, str], out: Path) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        for size, suffix in ((LAPTOP, ""), (PHONE, "-phone")):
            page = browser.new_context(viewport=size, device_scale_factor=1).new_page()
            if not suffix:
                _shoot(page, f"{base}/console/login", out, "login")
            page.goto(f"{base}/console/login")
            page.fill("#api_key", key)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            pages = {
                "home": "/console/",
                "approvals": "/console/approvals",
                "task-draft": f"/console/tasks/{ids['task_id']}",
                "tasks": "/console/tasks",
                "my-memory": "/console/memory",
                "memory": f"/console/memory/{ids['memory_id']}",
                "deletion": f"/console/deletions/{ids['job_id']}",
            }
            wanted = pages if not suffix else {"task-draft": pages["task-draft"], "my-memory": pages["my-memory"]}
            for name, path in wanted.items():
                _shoot(page, f"{base}{path}", out, name + suffix)
            if not suffix:
                _shoot(page, f"{base}/docs", out, "docs", full_page=False)  # the operations; not every schema
            page.context.close()
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/console"))
    out: Path = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    port, temporal_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="mnemo-shots-") as data_dir:
        mnemo = Path(sys.executable).with_name("mnemo")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
        stack = subprocess.Popen(
            [str(mnemo), "dev", "--data-dir", data_dir, "--port", str(port), "--temporal-port", str(temporal_port)],
            env=env, stdout=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait("mnemo dev to be ready", lambda: httpx.get(f"{base}/readyz", timeout=5).status_code == 200)
            key = (Path(data_dir) / "admin.key").read_text().strip()
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
                ids = _prepare(api)
            _browse(base, key, ids, out)
        finally:
            os.killpg(stack.pid, signal.SIGINT)
            stack.wait(60)


if __name__ == "__main__":
    main()
