"""`mnemo api` and `mnemo worker --metrics-port` as the real commands (subprocesses): JSON lines on stderr, /metrics
on both, the worker's with the Temporal SDK's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from api.devstack.processes import free_port
from api.settings import Settings
from tests.observability.scrape import names, parse
from tests.workers import worker_env

MNEMO = str(Path(sys.executable).parent / "mnemo")


@contextmanager
def command(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as stderr:
        process = subprocess.Popen([MNEMO, *args], env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def fetch_until(url: str, wanted: str, process: subprocess.Popen[bytes], timeout: float = 90) -> str:
    """The body at ``url`` once it contains ``wanted`` (the process is starting meanwhile)."""
    deadline, body = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the command exited with {process.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body = str(response.read().decode())
            if wanted in body:
                return body
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} never contained {wanted!r}; last: {body[:500]}")


def json_lines(log: Path) -> list[dict[str, object]]:
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # a line that is not JSON fails here


def test_mnemo_api_logs_json_lines_and_serves_metrics(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    env = worker_env(settings, MNEMO_API_PORT=str(port), MNEMO_API_HOST="127.0.0.1")
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    log = tmp_path / "api.log"
    with command(["api"], env, log) as process:
        fetch_until(f"http://127.0.0.1:{port}/healthz", "ok", process)
        body = fetch_until(f"http://127.0.0.1:{port}/metrics", "mnemo_http_request_duration_seconds", process)
    samples = parse(body)
    assert ("mnemo_http_request_duration_seconds_count",
            frozenset({"route": "/healthz", "method": "GET", "status": "200"}.items())) in samples
    records = json_lines(log)
    assert any(r["logger"] == "mnemo.request" and r.get("route") == "/healthz" for r in records), records
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)


def test_mnemo_worker_serves_metrics_on_its_port(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    env = worker_env(settings.model_copy(update={"task_queue": f"cmd-{os.getpid()}-{port}"}))
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    log = tmp_path / "worker.log"
    with command(["worker", "--metrics-port", str(port)], env, log) as process:
        body = fetch_until(f"http://127.0.0.1:{port}/metrics", "temporal_num_pollers", process)
    assert {"temporal_num_pollers", "process_cpu_seconds_total"} <= names(parse(body))
    assert process.returncode == 0
    json_lines(log)
