"""The search projection is derived data: a Temporal workflow rebuilds it from the source rows."""

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.settings import Settings
from api.temporal import connect, start_projection_rebuild
from api.worker import build_worker
from memory.db import tenant_session
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from workflows.projection import rebuild_workflow_id


async def test_rebuild_restores_a_lost_projection(
    client: TestClient, engine: Engine, settings: Settings, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    for n in range(5):
        client.post("/memory-candidates", json=candidate(f"重建投影 样本{n}"), headers=auth(key))
    corrected = client.post("/memory-candidates", json=candidate("旧值 北京"), headers=auth(key)).json()
    client.patch(
        f"/memories/{corrected['memory_id']}", json={"expected_version": 1, "content": "新值 深圳"}, headers=auth(key)
    )
    with tenant_session(engine, tenant) as session:
        session.execute(text("DELETE FROM memory_search"))
    assert client.post("/memory-query", json={"query": "重建投影"}, headers=auth(key)).json()["items"] == []

    temporal = await connect(settings)
    with ThreadPoolExecutor(max_workers=4) as executor:
        async with build_worker(temporal, engine, settings.task_queue, executor):
            handle = await start_projection_rebuild(temporal, settings.task_queue, tenant, batch_size=2)
            result = await handle.result()
        listed: list[str] = []
        for _ in range(50):  # visibility is eventually consistent: poll, bounded
            listed = [w.id async for w in temporal.list_workflows(f"MnemoTenant = '{tenant}'")]
            if listed:
                break
            await asyncio.sleep(0.1)
    assert listed == [rebuild_workflow_id(tenant)]
    assert (result.rebuilt, result.batches) == (6, 3)
    found = client.post("/memory-query", json={"query": "重建投影", "limit": 10}, headers=auth(key)).json()["items"]
    assert len(found) == 5
    # The corrected memory is rebuilt from its current version only.
    assert client.post("/memory-query", json={"query": "北京"}, headers=auth(key)).json()["items"] == []
    recalled = client.post("/memory-query", json={"query": "深圳"}, headers=auth(key)).json()["items"]
    assert [i["version"] for i in recalled] == [2]
