"""The supervisor's rules with real child processes: backoff doubles, a crash loop stops with one line."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api.devstack.processes import StackError, spawn
from api.devstack.supervisor import Child, RestartPolicy, Supervisor


def _crashing_child(tmp_path: Path, starts: list[float]) -> tuple[Child, list[subprocess.Popen[bytes]]]:
    """A child that prints a line and exits 3 right after every start."""
    log = tmp_path / "crasher.log"
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        starts.append(time.monotonic())
        crash = "print('cannot open the frobnicator'); raise SystemExit(3)"
        procs.append(spawn([sys.executable, "-c", crash], log_path=log))

    start()
    child = Child("crasher", poll=lambda: procs[-1].poll(), restart=start, pid=lambda: procs[-1].pid, log_path=log)
    return child, procs


def test_a_child_that_keeps_crashing_is_restarted_with_backoff_then_stops_the_stack(tmp_path: Path) -> None:
    starts: list[float] = []
    child, _ = _crashing_child(tmp_path, starts)
    lines: list[str] = []
    supervisor = Supervisor([child], RestartPolicy(limit=4, window=60, first_delay=0.2), say=lines.append)
    deadline = time.monotonic() + 20
    with pytest.raises(StackError) as stopped:
        while time.monotonic() < deadline:
            supervisor.tick()
            time.sleep(0.02)
    assert len(starts) == 4  # the first start and three restarts
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4 and gaps[2] >= 0.8, gaps  # doubling
    crashes = [line for line in lines if "crashed" in line]
    assert len(crashes) == 3
    assert crashes[0].startswith(
        "mnemo dev: the crasher crashed (exit code 3; last log line: cannot open the frobnicator)"
    )
    assert "restarting it in 0.2s" in crashes[0] and "restarting it in 0.8s" in crashes[2]
    message = str(stopped.value)
    assert "\n" not in message
    assert message.startswith("the crasher crashed 4 times within 60s, stopping the stack (last: exit code 3")
    assert "cannot open the frobnicator" in message


def test_a_restart_that_fails_counts_as_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "broken.log"
    proc = spawn([sys.executable, "-c", "raise SystemExit(1)"], log_path=log)

    def restart() -> None:
        raise StackError("the broken thing exited during start-up")

    child = Child("broken", poll=proc.poll, restart=restart, pid=lambda: proc.pid, log_path=log)
    lines: list[str] = []
    supervisor = Supervisor([child], RestartPolicy(limit=2, window=60, first_delay=0.05), say=lines.append)
    deadline = time.monotonic() + 10
    with pytest.raises(StackError, match=r"crashed 2 times .*restart failed: the broken thing exited during start-up"):
        while time.monotonic() < deadline:
            supervisor.tick()
            time.sleep(0.02)
    assert len(lines) == 1 and "exit code 1" in lines[0]


def test_crashes_outside_the_window_are_forgotten(tmp_path: Path) -> None:
    starts: list[float] = []
    child, _ = _crashing_child(tmp_path, starts)
    lines: list[str] = []
    supervisor = Supervisor([child], RestartPolicy(limit=2, window=0.3, first_delay=0.4), say=lines.append)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # a crash every ~0.4 s: never two within 0.3 s
        supervisor.tick()
        time.sleep(0.02)
    assert len(starts) >= 4
    assert all("crash 1 within" in line for line in lines if "crashed" in line)
