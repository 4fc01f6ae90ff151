"""``mnemo worker --processes N``: N worker processes polling the same task queues, supervised by this one.

One worker process runs its activities and workflow tasks under one interpreter lock, so it uses about one core
however many the machine has (issue 28: 200 report tasks on 2 cores). N processes are N independent Temporal
workers: Temporal hands each task to whichever polls first, and a task whose process dies is retried elsewhere once
its heartbeat (activities) or its workflow task times out — nothing is lost.

A child that exits is started again after a backoff (:class:`api.devstack.supervisor.Supervisor`, the same rules as
``mnemo dev``'s children); one that crashes ``limit`` times within ``window`` seconds stops every process and the
command exits 1 with one line naming it. SIGINT or SIGTERM stops every child (each shuts down through the SDK, as
``mnemo worker`` does) and the command exits 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from api.devstack.processes import StackError, spawn, stop
from api.devstack.supervisor import Child, RestartPolicy, Supervisor

STOP_SECONDS = 30.0
"""How long a child may take to shut down cleanly after SIGTERM before it is killed."""


def child_args(tasks: str | None, metrics_port: int | None, index: int) -> list[str]:
    """The command of child ``index``: ``mnemo worker`` with the same task modules; its /metrics (when asked for) on
    ``metrics_port + index``, as two processes cannot share a port."""
    args = [sys.executable, "-m", "api.cli", "worker"]
    if tasks is not None:
        args += ["--tasks", tasks]
    if metrics_port is not None:
        args += ["--metrics-port", str(metrics_port + index)]
    return args


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run_worker_processes(
    count: int, tasks: str | None, metrics_port: int | None, policy: RestartPolicy,
    say: Callable[[str], None] = lambda line: print(line, flush=True),
) -> int:
    """Run ``count`` supervised worker processes until SIGINT/SIGTERM (0) or one keeps crashing (1)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    procs: list[subprocess.Popen[bytes]] = []

    def child(index: int) -> Child:
        def restart() -> None:
            procs[index] = spawn(child_args(tasks, metrics_port, index), log_path=None)

        return Child(f"worker process {index + 1}/{count}", poll=lambda: procs[index].poll(), restart=restart,
                     pid=lambda: procs[index].pid, log_path=None)

    try:
        for index in range(count):
            procs.append(spawn(child_args(tasks, metrics_port, index), log_path=None))
        say(f"mnemo worker: {count} worker processes (pids {', '.join(str(p.pid) for p in procs)})")
        supervisor = Supervisor([child(index) for index in range(count)], policy, say=say, command="mnemo worker",
                                whole="every worker process")
        while True:
            supervisor.tick()
            time.sleep(0.2)
    except KeyboardInterrupt:
        say("mnemo worker: stopping every worker process…")
        return 0
    except StackError as exc:
        print(f"mnemo worker: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave children half-stopped
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for proc in procs:  # all asked at once: they shut down side by side
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            stop(proc, timeout=STOP_SECONDS)
        say("mnemo worker: stopped")
