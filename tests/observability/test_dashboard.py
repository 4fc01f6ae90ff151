"""Every metric the provisioned Grafana dashboard queries is one a real mnemo API or worker exports, with the labels
the query groups by: names collected from a real /metrics of each, after the work that makes them appear."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from fastapi.testclient import TestClient

from api.settings import Settings
from api.temporal import connect, start_projection_rebuild
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.observability.running import metrics_worker, scrape_until
from tests.observability.scrape import Samples, parse

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards" / "mnemo.json"
METRIC = re.compile(r"\b((?:mnemo|temporal)_[A-Za-z0-9_]+)\b")
GROUPING = re.compile(r"\bby \(([^)]*)\)")


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def labels_of(samples: Samples) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for name, labels in samples:
        found.setdefault(name, set()).update(label for label, _ in labels)
    return found


def api_samples(client: TestClient, make_key: MakeKey) -> Samples:
    """The API's /metrics after a write, a recall and a stale correction (each labelled family appears)."""
    key = make_key()
    created = client.post("/memory-candidates", json=candidate("我每周一开例会"), headers=auth(key)).json()
    client.post("/memory-query", json={"query": "例会", "retrieval": "lexical"}, headers=auth(key))
    url = f"/memories/{created['memory_id']}"
    client.patch(url, json={"expected_version": 1, "content": "我每周二开例会"}, headers=auth(key))
    client.patch(url, json={"expected_version": 1, "content": "我每周三开例会"}, headers=auth(key))
    return parse(client.get("/metrics").text)


async def test_the_dashboard_queries_only_exported_metrics_and_labels(
    client: TestClient, make_key: MakeKey, settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    exported = labels_of(api_samples(client, make_key))
    with metrics_worker(settings) as (own, port):
        temporal = await connect(own)
        await (await start_projection_rebuild(temporal, own.task_queue, tenant)).result()
        worker = scrape_until(port, "temporal_activity_schedule_to_start_latency_bucket")
    for name, labels in labels_of(worker).items():
        exported.setdefault(name, set()).update(labels)
    problems = []
    for expr in queries():
        used = METRIC.findall(expr)
        if not used:
            problems.append(f"{expr}: queries no mnemo or Temporal SDK metric")
        for name in used:
            if name not in exported:
                problems.append(f"{expr}: {name} is not exported")
        for grouping in GROUPING.findall(expr):
            for label in (part.strip() for part in grouping.split(",")):
                if label != "le" and not any(label in exported.get(name, set()) for name in used):
                    problems.append(f"{expr}: groups by {label!r}, which none of {used} carries")
    assert problems == [], "\n".join(problems)
    assert any(name.startswith("temporal_") for expr in queries() for name in METRIC.findall(expr))


def test_the_name_check_notices_a_misspelt_metric() -> None:
    """The pattern the check relies on finds the names in a query, so a misspelt one cannot slip through."""
    assert METRIC.findall("max by (status) (mnemo_taks)") == ["mnemo_taks"]
    assert GROUPING.findall("sum by (le, stage) (rate(x[5m]))") == ["le, stage"]
