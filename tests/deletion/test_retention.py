"""Retention: a Temporal Schedule sweeps expired records into ordinary deletion jobs."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.settings import Settings
from api.temporal import connect, ensure_retention_schedule
from memory.db import tenant_session
from tests.conftest import MakeKey, auth
from tests.factories import candidate, event


def _age(engine: Engine, tenant: str, table: str, column: str, ident: str, days: int) -> None:
    with tenant_session(engine, tenant) as session:
        session.execute(
            text(f"UPDATE {table} SET stored_at = now() - make_interval(days => :days) WHERE {column} = :id"),
            {"days": days, "id": ident},
        )


async def test_the_schedule_purges_what_outlived_its_policy_and_nothing_else(
    api: TestClient, deletion_settings: Settings, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    reader = make_key(tenant=tenant, roles=())  # its memories stay CANDIDATE
    writer = make_key(tenant=tenant)
    stale = api.post("/memory-candidates", json=candidate("过期未确认的候选"), headers=auth(reader)).json()["memory_id"]
    fresh = api.post("/memory-candidates", json=candidate("新的候选"), headers=auth(reader)).json()["memory_id"]
    active = api.post(
        "/memory-candidates", json=candidate("很久以前确认的事实"), headers=auth(writer)
    ).json()["memory_id"]
    old_event = api.post("/memory-events", json=event("old"), headers=auth(writer)).json()["event_id"]
    _age(engine, tenant, "memories", "memory_id", stale, 40)
    _age(engine, tenant, "memories", "memory_id", active, 400)
    _age(engine, tenant, "memory_events", "event_id", old_event, 200)
    for _ in range(3):  # being recalled never extends retention
        api.post("/memory-query", json={"query": "候选"}, headers=auth(reader))

    client = await connect(deletion_settings)
    schedule_id = f"retention-test-{uuid.uuid4().hex[:8]}"
    handle = await ensure_retention_schedule(client, deletion_settings.task_queue, timedelta(hours=1), schedule_id)
    try:
        again = await ensure_retention_schedule(client, deletion_settings.task_queue, timedelta(hours=1), schedule_id)
        assert again.id == handle.id
        await handle.trigger()
        deadline = time.monotonic() + 60
        statuses: list[str] = []
        while time.monotonic() < deadline:
            with tenant_session(engine, tenant) as session:
                statuses = list(session.execute(text("SELECT status FROM deletion_jobs")).scalars())
            if len(statuses) == 2 and set(statuses) == {"completed"}:
                break
            await asyncio.sleep(0.2)
        assert sorted(statuses) == ["completed", "completed"]
    finally:
        await handle.delete()

    assert api.get(f"/memories/{stale}", headers=auth(reader)).status_code == 404
    assert api.get(f"/memories/{fresh}", headers=auth(reader)).status_code == 200
    # No "forever": unconfirmed for a year, an active memory expires (kept, but no longer used).
    assert api.get(f"/memories/{active}", headers=auth(writer)).json()["status"] == "EXPIRED"
    with tenant_session(engine, tenant) as session:
        payload = session.execute(
            text("SELECT payload FROM memory_events WHERE event_id = :id"), {"id": old_event}
        ).scalar_one()
    assert payload == {}
