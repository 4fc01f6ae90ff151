"""`mnemo dev` hands its children the data dir, so task artifacts land in it, not in the working directory."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from api.cli.hints import mnemo_executable, mnemo_hint, shown
from api.devstack.processes import StackError, ephemeral_port_range, free_port, port_is_free
from api.devstack.stack import DevOptions, DevStack, run_dev, running_api_url
from api.settings import Settings


def test_children_get_the_data_dir_and_the_services(tmp_path: Path) -> None:
    stack = DevStack(DevOptions(data_dir=tmp_path / "dev", port=18000, temporal_port=17233))
    stack.settings = Settings(
        database_url="postgresql+psycopg://u:p@127.0.0.1:5/mnemo", temporal_address="127.0.0.1:17233"
    )
    env = stack._child_env()
    assert env["MNEMO_DATA_DIR"] == str((tmp_path / "dev").resolve())
    assert env["MNEMO_API_PORT"] == "18000"
    assert env["MNEMO_TEMPORAL_ADDRESS"] == "127.0.0.1:17233"


def test_an_api_port_that_temporal_or_its_ui_would_take_is_refused_before_anything_starts(tmp_path: Path) -> None:
    for port, temporal_port in ((18833, 17833), (17234, 17234)):  # the UI is --temporal-port + 1000
        stack = DevStack(DevOptions(data_dir=tmp_path / "dev", port=port, temporal_port=temporal_port))
        with pytest.raises(StackError, match=f"ports must differ: the mnemo API's {port} "):
            stack.start()
        assert stack.children == {} and stack.settings is None


def test_ports_chosen_for_the_stack_lie_outside_the_range_outgoing_connections_draw_from() -> None:
    """Embedded PostgreSQL once failed to bind a port taken, between choosing and binding, as the source
    port of one of Temporal's own connections; a port below the ephemeral range cannot be taken that way."""
    low, high = ephemeral_port_range()
    chosen = {free_port() for _ in range(50)}
    assert all(not low <= port <= high and port_is_free(port) for port in chosen)
    avoid = set(chosen)
    assert all(free_port(avoid=avoid) not in avoid for _ in range(50))


def test_a_failed_start_leaves_no_half_made_data_dir_and_no_lock(tmp_path: Path) -> None:
    """issue 24, item 10: a start refused for a busy port left a data dir holding only dev.lock."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # run_dev installs its own
    try:
        _start_on_a_busy_port(tmp_path)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _start_on_a_busy_port(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as occupier:
        occupier.bind(("127.0.0.1", 0))
        occupier.listen()
        busy = occupier.getsockname()[1]
        fresh = tmp_path / "fresh"
        assert run_dev(DevOptions(data_dir=fresh, port=busy, temporal_port=free_port()), None) == 1
        assert not fresh.exists()
        kept = tmp_path / "kept"
        kept.mkdir()
        (kept / "admin.key").write_text("mnemo_x\n")
        assert run_dev(DevOptions(data_dir=kept, port=busy, temporal_port=free_port()), None) == 1
        assert sorted(p.name for p in kept.iterdir()) == ["admin.key"]


def test_the_cli_reads_the_api_url_of_a_running_stack_and_ignores_a_dead_ones(tmp_path: Path) -> None:
    """`mnemo dev --port 21080` records its URL; a stack.json left by a killed `mnemo dev` names no stack."""
    (tmp_path / "stack.json").write_text(json.dumps({"pid": os.getpid(), "api_url": "http://127.0.0.1:21080"}))
    assert running_api_url(tmp_path) == "http://127.0.0.1:21080"
    child = subprocess.Popen(["true"])  # a pid that has exited (and been reaped)
    child.wait()
    (tmp_path / "stack.json").write_text(json.dumps({"pid": child.pid, "api_url": "http://127.0.0.1:21080"}))
    assert running_api_url(tmp_path) is None
    assert running_api_url(tmp_path / "nothing-here") is None


def test_hints_name_mnemo_as_it_can_be_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the venv on PATH, `mnemo` is not a command: the hint names this installation's script."""
    script = Path(sys.executable).parent / "mnemo"
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # a directory the installation does not lie under: its script by absolute path
    assert mnemo_executable() == str(script.absolute())
    assert shown(tmp_path / ".venv" / "bin" / "mnemo") == ".venv/bin/mnemo"  # relative where it lies under the cwd
    assert mnemo_hint("task", "approve", "t 1", data_dir=tmp_path / "d").endswith(
        "mnemo task approve 't 1' --data-dir d")  # the data dir as the person can type it, from here
    monkeypatch.setenv("PATH", str(script.parent))
    assert mnemo_hint("task", "list", data_dir=Path(".mnemo")) == "mnemo task list"
