"""/metrics on the API: request durations by route template, recall stages and bundles, the database's figures."""

from __future__ import annotations

import uuid
from datetime import timedelta

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import Engine, text

from api.devstack.processes import free_port
from api.observability.metrics import FigureCollector
from memory.db import make_engine, tenant_session
from memory.recall.stages import Stage
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.observability.scrape import Samples, parse, value


def scrape(client: TestClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def test_request_durations_are_labelled_by_route_template_never_by_id(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    created = client.post("/memory-candidates", json=candidate("我住在南京"), headers=auth(key)).json()
    before = scrape(client)
    assert client.get(f"/memories/{created['memory_id']}", headers=auth(key)).status_code == 200
    assert client.get(f"/memories/{uuid.uuid4()}", headers=auth(key)).status_code == 404
    after = scrape(client)
    count = "mnemo_http_request_duration_seconds_count"
    for status in ("200", "404"):
        labels = {"route": "/memories/{memory_id}", "method": "GET", "status": status}
        assert value(after, count, **labels) == value(before, count, **labels) + 1
    label_values = {v for (_, labels) in after for _, v in labels}
    assert created["memory_id"] not in label_values
    assert not any(tenant in v or "南京" in v for v in label_values)


def test_a_recall_times_its_stages_and_counts_its_bundle(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    client.post("/memory-candidates", json=candidate("我每周五写周报"), headers=auth(key))
    before = scrape(client)
    bundle = client.post("/memory-query", json={"query": "周报", "retrieval": "lexical"}, headers=auth(key)).json()
    assert len(bundle["items"]) == 1
    after = scrape(client)
    for stage in Stage:
        name = "mnemo_recall_stage_duration_seconds_count"
        assert value(after, name, stage=stage.value) == value(before, name, stage=stage.value) + 1, stage
    assert value(after, "mnemo_recall_bundle_items_count") == value(before, "mnemo_recall_bundle_items_count") + 1
    assert value(after, "mnemo_recall_bundle_items_sum") == value(before, "mnemo_recall_bundle_items_sum") + 1
    tokens = value(after, "mnemo_recall_bundle_tokens_sum") - value(before, "mnemo_recall_bundle_tokens_sum")
    assert tokens > 0
    assert value(after, "mnemo_recall_stale_versions_used_total") == 0


def test_a_stale_version_is_counted_as_a_stale_refusal(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    created = client.post("/memory-candidates", json=candidate("周报周五发"), headers=auth(key)).json()
    url = f"/memories/{created['memory_id']}"
    client.patch(url, json={"expected_version": 1, "content": "周报周四发"}, headers=auth(key))
    before = scrape(client)
    stale = client.patch(url, json={"expected_version": 1, "content": "周报周三发"}, headers=auth(key))
    assert stale.json()["error"]["code"] == "version_conflict"
    after = scrape(client)
    name = "mnemo_stale_refusals_total"
    assert value(after, name, code="version_conflict") == value(before, name, code="version_conflict") + 1


def test_figures_are_read_from_the_database_at_scrape(client: TestClient, make_key: MakeKey) -> None:
    writer, reader = make_key(), make_key(roles=())
    before = scrape(client)
    client.post("/memory-candidates", json=candidate("我喜欢乌龙茶"), headers=auth(writer))
    client.post("/memory-candidates", json=candidate("用户可能喜欢茶", source_level="E4"), headers=auth(reader))
    after = scrape(client)
    memories = "mnemo_memories"
    assert value(after, memories, status="ACTIVE", source_level="E2") == value(
        before, memories, status="ACTIVE", source_level="E2"
    ) + 1
    assert value(after, memories, status="CANDIDATE", source_level="E4") == value(
        before, memories, status="CANDIDATE", source_level="E4"
    ) + 1
    without = "mnemo_memories_without_evidence"
    assert value(after, without, status="ACTIVE") == value(before, without, status="ACTIVE") + 1
    backlog = value(after, "mnemo_embedding_backlog") - value(before, "mnemo_embedding_backlog")
    assert backlog == 2  # no worker embeds them here
    assert value(after, "mnemo_unconfirmed_inferences_active") == 0
    assert ("mnemo_task_duplicate_side_effects", frozenset()) in after


def test_a_deleted_memory_in_a_later_bundle_is_counted(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """The figure that must stay 0 can see a leak: a bundle event naming a memory after its tombstone."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    created = client.post("/memory-candidates", json=candidate("我的车牌是沪A12345"), headers=auth(key)).json()
    assert client.delete(f"/memories/{created['memory_id']}", headers=auth(key)).status_code == 202
    client.post("/memory-query", json={"query": "车牌", "retrieval": "lexical"}, headers=auth(key))
    assert value(scrape(client), "mnemo_recalls_of_deleted_content") == 0
    forged = {"t": tenant, "ref": f"{created['memory_id']}@1"}
    with tenant_session(engine, tenant) as session:
        session.execute(text(
            "INSERT INTO audit_log (tenant_id, actor, action, detail, at) VALUES (:t, 'alice', 'MEMORY_BUNDLE_BUILT', "
            "jsonb_build_object('selected_refs', jsonb_build_array(CAST(:ref AS text))), now() + :later)"
        ), {**forged, "later": timedelta(seconds=30)})
    try:  # 30 s after the barrier: a recall racing the barrier's transaction, not a leak
        assert value(scrape(client), "mnemo_recalls_of_deleted_content") == 0
        with tenant_session(engine, tenant) as session:
            session.execute(text("UPDATE audit_log SET at = at + interval '40 seconds' WHERE tenant_id = :t "
                                 "AND action = 'MEMORY_BUNDLE_BUILT' AND NOT detail ? 'trace_id'"), forged)
        assert value(scrape(client), "mnemo_recalls_of_deleted_content") == 1  # 70 s after: a leak
    finally:  # the forged event must not outlive the test
        with tenant_session(engine, tenant) as session:
            session.execute(text(
                "DELETE FROM audit_log WHERE tenant_id = :t AND action = 'MEMORY_BUNDLE_BUILT' "
                "AND detail -> 'selected_refs' = jsonb_build_array(CAST(:ref AS text)) AND NOT detail ? 'trace_id'"
            ), forged)


def test_figures_that_cannot_be_read_are_reported_down_not_zero() -> None:
    """A database that cannot be reached gives mnemo_figures_up 0 and no figure at all, never a row of zeros."""
    unreachable = make_engine(f"postgresql+psycopg://mnemo@127.0.0.1:{free_port()}/mnemo")
    try:
        registry = CollectorRegistry()
        registry.register(FigureCollector(unreachable))
        samples = parse(generate_latest(registry).decode())
    finally:
        unreachable.dispose()
    assert value(samples, "mnemo_figures_up") == 0
    assert {name for name, _ in samples} == {"mnemo_figures_up"}


def test_figures_that_were_read_are_reported_up(client: TestClient) -> None:
    assert value(scrape(client), "mnemo_figures_up") == 1
