"""Usage counters (hotness): bumped by each bundle that injects a memory, purged with its projection."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from api.devstack.postgres import PostgresInfo
from memory.db import tenant_session
from memory.models import MemoryUsage
from memory.store.projection import delete_projection
from memory.store.usage import mark_used_ids
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate


def _hotness(api: TestClient, key: str, memory_id: str) -> float:
    bundle = api.post("/memory-query", json={"query": "wombat sanctuary volunteer"}, headers=auth(key)).json()
    [item] = [i for i in bundle["items"] if i["memory_id"] == memory_id]
    return float(item["score_breakdown"]["hotness"])


def _one_memory(api: TestClient, make_key: MakeKey, content: str) -> tuple[str, str, str]:
    """(tenant, key, memory id) of a brand-new tenant holding one memory."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    memory_id = api.post("/memory-candidates", json=candidate(content), headers=auth(key)).json()["memory_id"]
    return tenant, key, str(memory_id)


def test_an_injected_memory_gets_hotter_and_its_usage_is_purged_with_it(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant, key, memory_id = _one_memory(api, make_key, "Volunteers at the wombat sanctuary on Sundays")
    assert _hotness(api, key, memory_id) == 0.0  # never injected before this bundle
    first = _hotness(api, key, memory_id)
    assert first > 0.0
    assert _hotness(api, key, memory_id) > first  # used twice now, as recently

    job = api.delete(f"/memories/{memory_id}", headers=auth(key)).json()["job_id"]
    wait_for(api, key, job, completed)
    with tenant_session(engine, tenant) as session:
        left = session.execute(select(MemoryUsage).where(MemoryUsage.memory_id == memory_id)).all()
    assert left == []


def test_a_bundle_never_recreates_usage_for_a_memory_whose_projection_is_gone(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant, _, memory_id = _one_memory(api, make_key, "The user keeps bees on the roof")
    injected = SimpleNamespace(memory=SimpleNamespace(memory_id=uuid.UUID(memory_id)))
    with tenant_session(engine, tenant) as session:
        delete_projection(session, tenant, [uuid.UUID(memory_id)])  # as a purge that committed mid-bundle
        mark_used_ids(session, tenant, [injected.memory.memory_id], datetime.now(UTC))
        assert session.execute(select(MemoryUsage).where(MemoryUsage.tenant_id == tenant)).all() == []


def _waiting_on_a_lock(postgres: PostgresInfo) -> bool:
    """Read as the cluster's superuser: the application role sees no other session's wait event or query in
    pg_stat_activity (they read as null), so asked through ``engine`` this never held and the wait below always
    ran its whole 10 s."""
    with psycopg.connect(postgres.conninfo()) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO memory_usage%'"
        ).fetchone()
    return row is not None and row[0] > 0


def test_a_bundle_racing_an_uncommitted_purge_waits_for_it_and_writes_no_counter(
    api: TestClient, make_key: MakeKey, engine: Engine, postgres: PostgresInfo
) -> None:
    tenant, _, memory_id = _one_memory(api, make_key, "The user restores old typewriters")
    injected = SimpleNamespace(memory=SimpleNamespace(memory_id=uuid.UUID(memory_id)))
    errors: list[BaseException] = []

    def bundle() -> None:
        try:
            with tenant_session(engine, tenant) as session:
                mark_used_ids(session, tenant, [injected.memory.memory_id], datetime.now(UTC))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    with tenant_session(engine, tenant) as purge:
        delete_projection(purge, tenant, [uuid.UUID(memory_id)])  # deleted, not yet committed
        racing = threading.Thread(target=bundle)
        racing.start()
        deadline = time.monotonic() + 10
        while not _waiting_on_a_lock(postgres) and racing.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert racing.is_alive(), "the bundle's usage write must wait for the purge holding the row"
    racing.join(timeout=10)
    assert errors == [] and not racing.is_alive()
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(MemoryUsage).where(MemoryUsage.tenant_id == tenant)).all() == []
