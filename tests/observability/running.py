"""A real ``run_worker`` (what ``mnemo worker --metrics-port`` runs) in a thread of the test process."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from api.devstack.processes import free_port
from api.settings import Settings
from api.worker import run_worker
from tests.observability.scrape import Samples, names, parse


@contextmanager
def metrics_worker(settings: Settings) -> Iterator[tuple[Settings, int]]:
    """A worker on a task queue of its own serving /metrics; its settings and metrics port."""
    port = free_port()
    own = settings.model_copy(update={"task_queue": f"metrics-{uuid.uuid4().hex[:8]}", "worker_metrics_port": port})
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=lambda: loop.run_until_complete(run_worker(own, stop)), daemon=True)
    thread.start()
    try:
        yield own, port
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
        assert not thread.is_alive(), "the worker did not stop"


def scrape_until(port: int, wanted: str, timeout: float = 60) -> Samples:
    """The worker's /metrics once it exports ``wanted`` (the SDK's metrics appear once its worker polls)."""
    deadline = time.monotonic() + timeout
    samples: Samples = {}
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                samples = parse(response.read().decode())
        except OSError:
            samples = {}
        if wanted in names(samples):
            return samples
        time.sleep(0.2)
    raise AssertionError(f"{wanted} never appeared; exported: {sorted(names(samples))}")
