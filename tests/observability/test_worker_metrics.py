"""The worker's /metrics: mnemo's process metrics and the Temporal SDK's own, from a real worker on one port."""

from __future__ import annotations

from api.settings import Settings
from tests.observability.running import metrics_worker, scrape_until
from tests.observability.scrape import names


def test_a_running_worker_serves_its_and_the_sdks_metrics(settings: Settings) -> None:
    with metrics_worker(settings) as (_, port):
        found = names(scrape_until(port, "temporal_num_pollers"))
    assert "process_cpu_seconds_total" in found  # mnemo's registry, in the same answer
