"""The worker's ``/metrics``: this process's events and the Temporal SDK's own metrics, on one port.

The SDK's metrics come from its Rust core (temporalio ``Runtime`` with ``PrometheusConfig``), which
serves them itself; it listens on a loopback port only, and the worker's endpoint appends that text
to its own, so Prometheus scrapes one target per worker (``mnemo worker --metrics-port``).
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from api.observability.metrics import EVENTS


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def temporal_runtime(port: int) -> Runtime:
    """A runtime whose SDK metrics (task queue latencies, slots, polls) are served on ``127.0.0.1:port``."""
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"127.0.0.1:{port}")))


def serve_worker_metrics(host: str, port: int, sdk_port: int) -> ThreadingHTTPServer:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread until the process ends (or ``shutdown()``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = generate_latest(EVENTS)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{sdk_port}/metrics", timeout=5) as sdk:
                    body += sdk.read()
            except OSError:
                pass  # the SDK serves nothing until its first metric; mnemo's own lines still answer
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # a scrape every 15 s is not news

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="mnemo-metrics", daemon=True).start()
    return server
