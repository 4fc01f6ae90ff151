"""End-to-end: ``mnemo dev`` as a real subprocess (no mocks).

These tests start the whole embedded stack (PostgreSQL, Temporal dev server,
worker, API), talk to it over HTTP, stop it with SIGINT and check that nothing
is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from api.devstack.processes import free_port, pid_alive, port_is_free

pytestmark = pytest.mark.e2e

MNEMO = Path(sys.executable).parent / "mnemo"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 45.0
FAIL_FAST_TIMEOUT = 20.0


# --------------------------------------------------------------------------- ports


def _free_temporal_port(*, taken: set[int]) -> int:
    """A Temporal frontend port T such that T and T+1000 (its UI) are both free."""
    for _ in range(200):
        port = free_port(avoid=taken)
        ui = port + 1000
        if ui <= 65535 and ui not in taken and port_is_free(ui):
            return port
        taken.add(port)
    raise RuntimeError("no free Temporal port pair (T, T+1000) found")


@dataclass
class Ports:
    api: int
    temporal: int

    @classmethod
    def pick(cls, taken: set[int] | None = None) -> Ports:
        taken = set(taken or ())
        api = free_port(avoid=taken)
        taken.add(api)
        taken.add(api - 1000)  # api must not be some temporal port's UI port and vice versa
        temporal = _free_temporal_port(taken=taken)
        return cls(api=api, temporal=temporal)

    def all(self) -> set[int]:
        return {self.api, self.temporal, self.temporal + 1000}


# --------------------------------------------------------------------------- the subprocess


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"<{path.name} missing>"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class DevRun:
    """One ``mnemo dev`` subprocess with its output streamed to files."""

    data_dir: Path
    ports: Ports
    log_dir: Path
    name: str
    proc: subprocess.Popen[bytes] = field(init=False)
    started_at: float = field(init=False)
    known_child_pids: dict[str, int] = field(default_factory=dict)
    demo: bool = False
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = self.log_dir / f"{self.name}.stdout.log"
        self.stderr_path = self.log_dir / f"{self.name}.stderr.log"
        args = [
            str(MNEMO), "dev",
            "--data-dir", str(self.data_dir),
            "--port", str(self.ports.api),
            "--temporal-port", str(self.ports.temporal),
            "--demo" if self.demo else "--no-demo",
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.started_at = time.monotonic()
            self.proc = subprocess.Popen(
                args,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.log_dir,
                preexec_fn=_like_a_terminal,
            )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.api}"

    def diagnostics(self) -> str:
        stack_logs = self.data_dir / "logs"
        parts = [
            f"--- {self.name} stdout (tail) ---\n{_tail(self.stdout_path)}",
            f"--- {self.name} stderr (tail) ---\n{_tail(self.stderr_path)}",
        ]
        if stack_logs.is_dir():
            for log in sorted(stack_logs.glob("*.log")):
                parts.append(f"--- {log} (tail) ---\n{_tail(log, 15)}")
        return "\n".join(parts)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> float:
        """Poll GET /readyz until 200; return seconds since the process started."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            code = self.proc.poll()
            assert code is None, f"`mnemo dev` exited with {code} before it was ready\n{self.diagnostics()}"
            try:
                response = httpx.get(f"{self.api_url}/readyz", timeout=5)
                if response.status_code == 200:
                    return time.monotonic() - self.started_at
                last = f"{response.status_code} {response.text}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.2)
        pytest.fail(f"/readyz not 200 within {timeout:.0f}s (last: {last})\n{self.diagnostics()}")

    def wait_state(self, timeout: float = 10.0) -> dict[str, object]:
        """stack.json is written right after the API answers; wait for it (bounded) and read it."""
        path = self.data_dir / "stack.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists():
                try:
                    state: dict[str, object] = json.loads(path.read_text())
                except json.JSONDecodeError:
                    pass  # caught mid-write
                else:
                    pids = state.get("child_pids")
                    assert isinstance(pids, dict), f"stack.json has no child_pids: {state}"
                    self.known_child_pids.update({str(k): int(v) for k, v in pids.items() if v is not None})
                    return state
            time.sleep(0.1)
        pytest.fail(f"{path} did not appear within {timeout:.0f}s\n{self.diagnostics()}")

    def interrupt_and_wait(self, timeout: float = STOP_TIMEOUT) -> tuple[int, float]:
        """SIGINT (Ctrl-C) and wait for the exit; returns (exit code, seconds to exit)."""
        began = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`mnemo dev` did not exit within {timeout:.0f}s of SIGINT\n{self.diagnostics()}")
        return code, time.monotonic() - began

    def cleanup(self) -> None:
        """Never leave a process behind: SIGINT, then SIGKILL; then any child it may have orphaned."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for pid in self.known_child_pids.values():
            if pid_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)  # each child leads its own process group
                except (ProcessLookupError, PermissionError):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)


def _like_a_terminal() -> None:
    """SIGINT must reach ``mnemo dev`` as a terminal Ctrl-C does.

    A background job of a non-interactive shell (e.g. ``pytest &`` in a CI script)
    inherits SIGINT as *ignored*, and Python then never installs its
    KeyboardInterrupt handler; reset it so the test does not depend on how it was launched.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _processes_mentioning(text: str) -> list[str]:
    needle = text.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if needle in cmdline:
            readable = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {readable}")
    return found


def _assert_all_gone(run: DevRun, pids: dict[str, int], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        alive = {name: pid for name, pid in pids.items() if pid_alive(pid)}
        leftovers = _processes_mentioning(str(run.data_dir))
        if not alive and not leftovers:
            return
        if time.monotonic() > deadline:
            pytest.fail(
                f"processes outlived `mnemo dev`: child pids still alive {alive}; "
                f"processes naming the data dir: {leftovers}\n{run.diagnostics()}"
            )
        time.sleep(0.1)


def _stop_cleanly(run: DevRun) -> None:
    pids = dict(run.known_child_pids)
    code, seconds = run.interrupt_and_wait()
    print(f"\n[e2e] {run.name}: exited {code} {seconds:.1f}s after SIGINT")
    assert code == 0, f"`mnemo dev` exited with {code} after SIGINT\n{run.diagnostics()}"
    _assert_all_gone(run, pids)
    assert not (run.data_dir / "stack.json").exists(), f"stack.json left behind\n{run.diagnostics()}"


# --------------------------------------------------------------------------- tests


def test_dev_stack_writes_recalls_stops_and_restarts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    logs = tmp_path / "out"
    token = uuid.uuid4().hex[:8]
    chinese = "端到端测试偏好蓝色主题"
    content = f"{chinese}。E2E test {token}: the user prefers the blue theme."
    memory = {
        "category": "PREFERENCE",
        "space": "USER",
        "content": content,
        "source": {
            "source_id": "e2e",
            "source_type": "EXPLICIT_USER_STATEMENT",
            "captured_at": "2026-06-01T09:00:00Z",
        },
        "source_level": "E1",
    }

    ports = Ports.pick()
    first = DevRun(data_dir, ports, logs, "first")
    second: DevRun | None = None
    third: DevRun | None = None
    try:
        ready = first.wait_ready()
        print(f"\n[e2e] first start (fresh data dir): /readyz 200 after {ready:.1f}s")
        state = first.wait_state()
        assert state["api_url"] == first.api_url
        assert set(first.known_child_pids) >= {"api", "worker", "postgres", "temporal"}, state

        key_path = data_dir / "admin.key"
        assert Path(str(state["admin_key_path"])) == key_path.resolve()
        key_stat = key_path.stat()
        assert stat.S_IMODE(key_stat.st_mode) == 0o600, oct(key_stat.st_mode)
        key_text = key_path.read_text()
        key = key_text.strip()
        assert key, "admin.key is empty"
        headers = {"Authorization": f"Bearer {key}"}

        with httpx.Client(base_url=first.api_url, headers=headers, timeout=10) as client:
            written = client.post("/memory-candidates", json=memory)
            assert written.status_code == 201, written.text
            body = written.json()
            assert body["status"] == "ACTIVE", body
            memory_id, version = body["memory_id"], body["version"]

            read = client.get(f"/memories/{memory_id}")
            assert read.status_code == 200, read.text
            assert read.json()["content"] == content
            assert read.json()["version"] == version

            found = client.post("/memory-query", json={"query": "偏好蓝色"})
            assert found.status_code == 200, found.text
            ids = [item["memory_id"] for item in found.json()["items"]]
            assert memory_id in ids, found.json()

        # A second `mnemo dev` on the same data dir, while the first runs, must fail fast.
        other_ports = Ports.pick(taken=ports.all())
        second = DevRun(data_dir, other_ports, logs, "second")
        try:
            code = second.proc.wait(timeout=FAIL_FAST_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a second `mnemo dev` on a busy data dir did not fail fast\n{second.diagnostics()}")
        failed_in = time.monotonic() - second.started_at
        print(f"[e2e] second `mnemo dev` on the same data dir refused in {failed_in:.1f}s")
        assert code != 0, second.diagnostics()
        err = second.stderr_path.read_text()
        assert "another `mnemo dev`" in err, second.diagnostics()
        # ...and did not disturb the running one.
        assert first.proc.poll() is None, first.diagnostics()
        assert httpx.get(f"{first.api_url}/readyz", timeout=10).status_code == 200

        _stop_cleanly(first)

        # Restart on the same data dir: the memory and the admin key survive.
        third = DevRun(data_dir, Ports.pick(), logs, "restart")
        ready = third.wait_ready()
        print(f"[e2e] restart (existing data dir): /readyz 200 after {ready:.1f}s")
        third.wait_state()
        assert key_path.read_text() == key_text, "admin.key changed across restarts"
        assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
        assert key_path.stat().st_ino == key_stat.st_ino
        with httpx.Client(base_url=third.api_url, headers=headers, timeout=10) as client:
            read = client.get(f"/memories/{memory_id}")
            assert read.status_code == 200, f"{read.text}\n{third.diagnostics()}"
            assert read.json()["content"] == content
            assert read.json()["version"] == version
            found = client.post("/memory-query", json={"query": "偏好蓝色"})
            assert found.status_code == 200, found.text
            assert memory_id in [item["memory_id"] for item in found.json()["items"]], found.json()

        _stop_cleanly(third)
    finally:
        for run in (first, second, third):
            if run is not None:
                run.cleanup()


def test_busy_api_port_is_a_one_line_error(tmp_path: Path) -> None:
    ports = Ports.pick()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as occupier:
        occupier.bind(("127.0.0.1", ports.api))
        occupier.listen()
        run = DevRun(tmp_path / "data", ports, tmp_path / "out", "busy-port")
        try:
            try:
                code = run.proc.wait(timeout=FAIL_FAST_TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.fail(
                    f"`mnemo dev` on a busy port did not exit within {FAIL_FAST_TIMEOUT:.0f}s\n{run.diagnostics()}"
                )
            print(f"\n[e2e] busy API port refused in {time.monotonic() - run.started_at:.1f}s")
            assert code != 0, run.diagnostics()
            lines = [line for line in run.stderr_path.read_text().splitlines() if line.strip()]
            assert len(lines) == 1, f"expected one line on stderr\n{run.diagnostics()}"
            assert str(ports.api) in lines[0], run.diagnostics()
            assert "--port" in lines[0].replace("--temporal-port", ""), run.diagnostics()
            # Nothing was started, so nothing may be left running.
            assert _processes_mentioning(str(run.data_dir)) == []
        finally:
            run.cleanup()


def _child_pid(run: DevRun, name: str) -> int:
    pids = run.wait_state()["child_pids"]
    assert isinstance(pids, dict)
    return int(pids[name])


def _kill_and_wait_for_restart(run: DevRun, name: str, crash_line: str, timeout: float = 60.0) -> float:
    """SIGKILL one child; wait until `mnemo dev` reports the crash, runs a new one and /readyz is 200 again."""
    old = _child_pid(run, name)
    began = time.monotonic()
    os.kill(old, signal.SIGKILL)
    deadline = began + timeout
    while time.monotonic() < deadline:
        assert run.proc.poll() is None, f"`mnemo dev` stopped after the {name} was killed\n{run.diagnostics()}"
        if crash_line in run.stdout_path.read_text() and _child_pid(run, name) != old:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the killed {name} was not restarted within {timeout:.0f}s\n{run.diagnostics()}")
    run.wait_ready()
    return time.monotonic() - began


def _memory(content: str) -> dict[str, object]:
    return {
        "category": "EVENT", "space": "USER", "content": content,
        "source": {"source_id": "e2e", "source_type": "EXPLICIT_USER_STATEMENT", "captured_at": "2026-06-01T09:00:00Z"},
        "source_level": "E1",
    }


def _wait_task(client: httpx.Client, task_id: str, run: DevRun, timeout: float = 120.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    state: dict[str, object] = {}
    while time.monotonic() < deadline:
        response = client.get(f"/tasks/{task_id}")
        assert response.status_code == 200, response.text
        state = response.json()
        if state["status"] not in ("CREATED", "READY", "RUNNING"):
            return state
        time.sleep(0.3)
    pytest.fail(f"task {task_id} still {state.get('status')} after {timeout:.0f}s\n{run.diagnostics()}")


def test_dev_stack_restarts_crashed_children_and_stops_on_one_that_keeps_crashing(tmp_path: Path) -> None:
    """kill -9 of each child is healed without losing an acknowledged write; a second crash of the
    worker within the window (limit 2 here) stops the stack with one line naming it; /readyz waits
    for the demo's sales data, so a report task started the moment it is 200 has its data."""
    import psycopg

    run = DevRun(
        tmp_path / "data", Ports.pick(), tmp_path / "out", "supervised", demo=True,
        env={"MNEMO_DEV_RESTART_LIMIT": "2", "MNEMO_DEV_RESTART_WINDOW_SECONDS": "600"},
    )
    try:
        ready = run.wait_ready()
        state = run.wait_state()
        lines = None
        conninfo = str(state["database_url"]).replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(conninfo) as conn:
            counted = conn.execute("SELECT count(*) FROM sales_order_lines WHERE tenant_id = 'default'").fetchone()
            (lines,) = counted or (0,)
        print(f"\n[e2e] supervised: /readyz 200 after {ready:.1f}s with {lines} demo order lines loaded")
        assert lines == 120_000, "/readyz said ready before the demo's sales data was loaded"
        checks = httpx.get(f"{run.api_url}/readyz", timeout=10).json()["checks"]
        assert {name: check["state"] for name, check in checks.items()} == {
            "database": "ok", "temporal": "ok", "worker": "ok", "demo_data": "ok"
        }, checks

        key = (run.data_dir / "admin.key").read_text().strip()
        with httpx.Client(base_url=run.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
            started = client.post("/tasks", json={
                "task_type": "monthly-report", "request_intent_id": f"e2e-{uuid.uuid4().hex[:8]}",
                "goal": {"month": "2026-05", "currency": "CNY"},
            })
            assert started.status_code == 201, started.text
            written = client.post("/memory-candidates", json=_memory("写在任何崩溃之前 before any crash"))
            assert written.status_code == 201, written.text
            before = written.json()["memory_id"]
            task = _wait_task(client, started.json()["task_id"], run)
            assert task["status"] == "WAITING_FOR_APPROVAL", task

            healed: dict[str, float] = {}
            healed["worker"] = _kill_and_wait_for_restart(run, "worker", "the worker crashed (killed by SIGKILL")
            healed["postgres"] = _kill_and_wait_for_restart(
                run, "postgres", "the PostgreSQL server crashed (killed by SIGKILL"
            )
            assert client.get(f"/memories/{before}").status_code == 200, "an acknowledged write was lost"
            written = client.post("/memory-candidates", json=_memory("写在数据库重启之后 after the database restart"))
            assert written.status_code == 201, written.text
            after = written.json()["memory_id"]
            healed["temporal"] = _kill_and_wait_for_restart(
                run, "temporal", "the Temporal dev server crashed (killed by SIGKILL"
            )
            assert client.get(f"/tasks/{task['task_id']}").json()["status"] == "WAITING_FOR_APPROVAL"
            healed["api"] = _kill_and_wait_for_restart(run, "api", "the API crashed (killed by SIGKILL")
            for memory_id in (before, after):
                assert client.get(f"/memories/{memory_id}").status_code == 200, "an acknowledged write was lost"
            times = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in healed.items())
            print("[e2e] healed after kill -9: " + times)

        pids = {name: pid for name, pid in run.known_child_pids.items()}
        published = run.wait_state()["child_pids"]
        assert isinstance(published, dict)
        pids.update({str(name): int(pid) for name, pid in published.items()})
        os.kill(pids["worker"], signal.SIGKILL)  # the worker's second crash within the window: the limit
        try:
            code = run.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a worker crashing twice did not stop `mnemo dev`\n{run.diagnostics()}")
        assert code == 1, run.diagnostics()
        errors = [line for line in run.stderr_path.read_text().splitlines() if line.strip()]
        assert len(errors) == 1, f"expected one line on stderr\n{run.diagnostics()}"
        assert "the worker crashed 2 times within 600s" in errors[0] and "killed by SIGKILL" in errors[0], errors
        _assert_all_gone(run, pids)
    finally:
        run.cleanup()
