"""One trace from the request to the SQL: a recall (request → stages, SQL) and a report step (request →
workflow → activity → SQL), through the real Temporal dev server and a real worker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import Engine

from api.main import create_app
from api.settings import Settings
from memory.db import make_engine, tenant_session
from memory.recall.stages import Stage
from memory.reports.sales import seed_sales
from tests.conftest import MakeKey, auth, poll
from tests.factories import candidate
from tests.workers import ThreadWorker


@pytest.fixture(scope="module")
def traced(settings: Settings, spans: InMemorySpanExporter) -> Iterator[tuple[TestClient, Engine]]:
    """An API and a worker on a queue of their own, built after the exporter, with an engine of their own."""
    own = settings.model_copy(update={"task_queue": f"traced-{uuid.uuid4().hex[:8]}"})
    engine = make_engine(own.require_database_url())
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine)).start()
    try:
        with TestClient(create_app(own)) as client:
            yield client, engine
    finally:
        worker.stop()
        engine.dispose()


def ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    """The names from ``span``'s parent up to its trace's root (as far as the exporter saw them)."""
    chain: list[str] = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        chain.append(span.name)
    return chain


def is_sql(span: ReadableSpan) -> bool:
    return span.kind.name == "CLIENT" and any(k.startswith("db.system") for k in (span.attributes or {}))


def server_span(finished: list[ReadableSpan], name: str) -> ReadableSpan:
    matching = [s for s in finished if s.name == name and s.parent is None]
    assert matching, sorted({s.name for s in finished})
    return matching[-1]


def test_a_recall_is_one_trace_from_request_to_sql(
    traced: tuple[TestClient, Engine], spans: InMemorySpanExporter, make_key: MakeKey
) -> None:
    client, _ = traced
    key = make_key()
    client.post("/memory-candidates", json=candidate("我每周五写周报"), headers=auth(key))
    spans.clear()
    response = client.post("/memory-query", json={"query": "周报", "retrieval": "lexical"}, headers=auth(key))
    assert response.status_code == 200
    finished = list(spans.get_finished_spans())
    root = server_span(finished, "POST /memory-query")
    in_trace = [s for s in finished if s.context.trace_id == root.context.trace_id]
    by_id = {s.context.span_id: s for s in in_trace}
    stages = {s.name: s for s in in_trace if s.name.startswith("recall.")}
    assert set(stages) == {f"recall.{stage.value}" for stage in Stage}
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in stages.values())
    sql = [s for s in in_trace if is_sql(s)]
    assert sql, sorted(s.name for s in in_trace)
    assert all(ancestors(s, by_id)[-1] == "POST /memory-query" for s in sql)
    assert not any("周报" in str(v) for s in sql for v in (s.attributes or {}).values())  # no parameters


def test_a_report_step_is_one_trace_from_request_to_workflow_to_activity_to_sql(
    traced: tuple[TestClient, Engine], spans: InMemorySpanExporter, make_key: MakeKey
) -> None:
    client, engine = traced
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    owner = make_key(tenant=tenant)
    with tenant_session(engine, tenant) as session:
        seed_sales(session, tenant, total=600)
    spans.clear()
    body = {"task_type": "monthly-report", "request_intent_id": "intent-traced",
            "goal": {"month": "2026-06", "currency": "CNY"}}
    created = client.post("/tasks", json=body, headers=auth(owner))
    assert created.status_code == 201, created.text
    task_id = created.json()["task_id"]
    poll(client, owner, f"/tasks/{task_id}", lambda v: v["status"] == "WAITING_FOR_APPROVAL", 60)
    finished = list(spans.get_finished_spans())
    root = server_span(finished, "POST /tasks")
    in_trace = [s for s in finished if s.context.trace_id == root.context.trace_id]
    by_id = {s.context.span_id: s for s in in_trace}
    steps = [s for s in in_trace if s.name == "RunActivity:task_run_step"]
    assert steps, sorted({s.name for s in in_trace})
    # The workflow's spans continue the trace the start carried (the SDK parents them on its StartWorkflow span).
    assert ancestors(steps[0], by_id) == ["StartActivity:task_run_step", "StartWorkflow:ReportTask", "POST /tasks"]
    assert any(s.name == "RunWorkflow:ReportTask" for s in in_trace)
    step_ids = {s.context.span_id for s in steps}
    step_sql = [s for s in in_trace if s.parent is not None and s.parent.span_id in step_ids and is_sql(s)]
    assert step_sql, "no SQL span under a report step"
