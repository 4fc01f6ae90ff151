"""How long ``mnemo dev`` takes from the command to ``/readyz`` 200, on a fresh data dir and on a restart of it
(issue 24, item 11), with the breakdown ``mnemo dev`` prints (when each part became ready).

    .venv/bin/python -m bench.dev_startup [--rounds 3]

Each round starts ``mnemo dev`` (with its demo) in a temporary data dir on free ports, polls ``/readyz``, stops
it with SIGINT, starts it again on the same data dir, and prints both times and the start-up lines.
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

import httpx

from api.devstack.processes import free_port, port_is_free

MNEMO = Path(sys.executable).parent / "mnemo"
BREAKDOWN = ("✓", "ready in")


def _ports() -> tuple[int, int]:
    """An API port and a Temporal port whose UI port (+ 1000) is free too."""
    api = free_port()
    while True:
        temporal = free_port(avoid={api, api - 1000})
        if port_is_free(temporal + 1000):
            return api, temporal


def start_once(data_dir: Path, log: Path, timeout: float = 120.0) -> float:
    """Seconds from spawning ``mnemo dev`` to ``/readyz`` 200; the stack is stopped again before returning."""
    api, temporal = _ports()
    with open(log, "wb") as out:
        began = time.monotonic()
        proc = subprocess.Popen(
            [str(MNEMO), "dev", "--data-dir", str(data_dir), "--port", str(api), "--temporal-port", str(temporal)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            while True:
                if time.monotonic() - began > timeout or proc.poll() is not None:
                    raise SystemExit(f"`mnemo dev` was not ready within {timeout:.0f}s; see {log}")
                try:
                    if httpx.get(f"http://127.0.0.1:{api}/readyz", timeout=2).status_code == 200:
                        return time.monotonic() - began
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        finally:
            time.sleep(1.0)  # let it print its addresses
            proc.send_signal(signal.SIGINT)
            proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for round_no in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="mnemo-startup-") as tmp:
            data_dir, log = Path(tmp) / "data", Path(tmp) / "dev.log"
            for label in ("fresh", "restart"):
                load = os.getloadavg()[0]
                seconds = start_once(data_dir, log)
                print(f"round {round_no} {label:<7} /readyz 200 after {seconds:.1f}s (load average {load:.2f})")
                for line in log.read_text().splitlines():
                    if any(mark in line for mark in BREAKDOWN):
                        print(f"    {line.strip()}")


if __name__ == "__main__":
    main()
