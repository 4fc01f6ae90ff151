"""``kill -9`` of the embedded postmaster: the supervisor's very next restart succeeds (issue 23, finding 8).

A backend busy in a query does not notice its postmaster died until the query ends, and keeps the shared
memory attached: the new postmaster refused to start ("pre-existing shared memory block ... is still in
use") and two restarts failed, three of the five allowed crashes spent. Now the restart ends what is left
of the old server first: the processes still holding its shared memory.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from api.devstack.postgres import EmbeddedPostgres
from api.devstack.processes import StackError, free_port
from api.devstack.supervisor import Child, RestartPolicy, Supervisor


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    postgres = EmbeddedPostgres(tmp_path / "pg", port=free_port())
    postgres.start()
    try:
        yield postgres
    finally:
        postgres.stop()


def _busy_backend(postgres: EmbeddedPostgres) -> threading.Thread:
    """A connection whose backend computes for a while without waiting on anything (so without noticing a dead
    postmaster); its own statement_timeout ends it in any case, so nothing runs on after the test."""
    conninfo = f"host=127.0.0.1 port={postgres.port} user=postgres password={postgres.password_file.read_text()}"
    started = threading.Event()

    def run() -> None:
        try:
            with psycopg.connect(conninfo + " dbname=mnemo", autocommit=True) as conn:
                conn.execute("SET statement_timeout = '60s'")
                started.set()
                conn.execute("SELECT count(*) FROM generate_series(1, 10000000000)")
        except psycopg.Error:
            pass  # its server was killed under it: expected

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    time.sleep(0.5)  # the query is running
    return thread


def test_the_first_restart_after_kill_9_of_the_postmaster_succeeds(server: EmbeddedPostgres) -> None:
    def restart() -> None:  # as `mnemo dev` restarts it (api.devstack.stack)
        try:
            server.start()
        except StackError:
            server.stop()
            raise

    child = Child("PostgreSQL server", poll=server.poll, restart=restart, pid=lambda: server.pid,
                  log_path=server.log_path)
    lines: list[str] = []
    supervisor = Supervisor([child], RestartPolicy(limit=5, window=60, first_delay=0.2), say=lines.append)
    busy = _busy_backend(server)
    postmaster = server.pid
    holders = server.shared_memory_holders()
    assert postmaster is not None and postmaster in holders and len(holders) > 2, holders
    os.kill(postmaster, signal.SIGKILL)

    deadline = time.monotonic() + 60
    while server.pid == postmaster or child.restart_at is not None:
        assert time.monotonic() < deadline, lines
        supervisor.tick()
        time.sleep(0.05)
    assert len(child.crashes) == 1, lines  # the kill itself; no restart failed
    assert [line for line in lines if "crashed" in line] == [lines[0]] and "SIGKILL" in lines[0], lines
    assert not set(holders) & set(server.shared_memory_holders())  # the busy backend went with its postmaster
    busy.join(10)
    conninfo = f"host=127.0.0.1 port={server.port} user=postgres password={server.password_file.read_text()}"
    with psycopg.connect(conninfo + " dbname=mnemo") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
