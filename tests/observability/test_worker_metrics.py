"""The worker's /metrics: mnemo's process metrics and the Temporal SDK's own, from a real worker on one port."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
import uuid

from api.devstack.processes import free_port
from api.settings import Settings
from api.worker import run_worker
from tests.observability.scrape import names, parse


def test_a_running_worker_serves_its_and_the_sdks_metrics(settings: Settings) -> None:
    port = free_port()
    own = settings.model_copy(update={"task_queue": f"metrics-{uuid.uuid4().hex[:8]}", "worker_metrics_port": port})
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=lambda: loop.run_until_complete(run_worker(own, stop)), daemon=True)
    thread.start()
    try:
        found: set[str] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "temporal_num_pollers" not in found:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    found = names(parse(response.read().decode()))
            except OSError:
                pass
            time.sleep(0.2)
        assert "temporal_num_pollers" in found, sorted(found)
        assert "process_cpu_seconds_total" in found  # mnemo's registry, in the same answer
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
    assert not thread.is_alive()
