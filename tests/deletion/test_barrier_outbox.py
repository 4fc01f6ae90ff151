"""The barrier covers what was derived only from the deleted records, and a deletion accepted while
Temporal is down completes once a worker is there, without the request being repeated.

The API here points at a Temporal address nothing listens on, so nothing but the barrier runs
until a real ``mnemo worker`` process (connected to the real dev server) drains the outbox.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text

from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.models import DeletionOutbox, Memory
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate, event
from tests.workers import worker_env

MNEMO = str(Path(sys.executable).parent / "mnemo")


@pytest.fixture
def queue(deletion_settings: Settings) -> Settings:
    """The real stack's settings on a task queue of this test's own (only its worker polls it)."""
    return deletion_settings.model_copy(update={"task_queue": f"outbox-{uuid.uuid4().hex[:8]}"})


@pytest.fixture
def down_api(queue: Settings) -> Iterator[TestClient]:
    """The API as it is while Temporal is down: its address is a port nobody listens on."""
    with TestClient(create_app(queue.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"}))) as client:
        yield client


def _write(api: TestClient, key: str, content: str, **overrides: Any) -> str:
    response = api.post("/memory-candidates", json=candidate(content, **overrides), headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


def _citing(*refs: str) -> dict[str, Any]:
    return {"source_id": "extraction-7", "source_type": "MODEL_EXTRACTION", "captured_at": "2026-06-01T09:00:00Z",
            "evidence_refs": list(refs)}


def _cite(engine: Engine, tenant: str, memory_id: str, *refs: str) -> None:
    """Set a memory's evidence links, as an extraction that built it from other records would have."""
    with tenant_session(engine, tenant) as session:
        session.execute(
            text("UPDATE memories SET evidence_refs = CAST(:refs AS jsonb) WHERE memory_id = :id"),
            {"refs": "[" + ", ".join(f'"{ref}"' for ref in refs) + "]", "id": memory_id},
        )


def _recalled(api: TestClient, key: str, query: str) -> set[str]:
    response = api.post(
        "/memory-query",
        json={"query": query, "retrieval": "lexical", "limit": 20, "min_relevance": 0},
        headers=auth(key),
    )
    assert response.status_code == 200, response.text
    return {item["memory_id"] for item in response.json()["items"]}


def _delete_while_down(api: TestClient, key: str, memory_id: str) -> str:
    accepted = api.delete(f"/memories/{memory_id}", headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert (body["barrier"], body["status"], body["purge_scheduled"]) == ("committed", "accepted", False)
    assert "queued" in body["warnings"][0]
    return str(body["job_id"])


def test_the_barrier_hides_memories_derived_only_from_the_deleted_records(
    down_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    target = _write(down_api, key, "用户住在上海静安")
    only = _write(down_api, key, "摘要：用户住在上海静安")
    of_only = _write(down_api, key, "再摘要：上海静安的住户")
    partial = _write(down_api, key, "摘要：上海静安或华东")
    unrelated = _write(down_api, key, "上海静安的天气很好")
    source = down_api.post("/memory-events", json=event("src"), headers=auth(key)).json()["event_id"]
    from_event = _write(down_api, key, "事件摘要：上海静安搬家")
    _cite(engine, tenant, only, f"memory:{target}")
    _cite(engine, tenant, of_only, f"memory:{only}")
    _cite(engine, tenant, partial, f"memory:{target}", "doc:handbook")
    _cite(engine, tenant, from_event, f"event:{source}")
    assert _recalled(down_api, key, "上海静安") == {target, only, of_only, partial, unrelated, from_event}

    _delete_while_down(down_api, key, target)
    # No purge has run (Temporal is down): what is derived only from the target is gone from every read already,
    # transitively; a memory with independent evidence stays until the purge re-derives it.
    for memory_id in (target, only, of_only):
        assert down_api.get(f"/memories/{memory_id}", headers=auth(key)).status_code == 404, memory_id
    assert down_api.get(f"/memories/{partial}", headers=auth(key)).json()["version"] == 1
    assert _recalled(down_api, key, "上海静安") == {partial, unrelated, from_event}

    accepted = down_api.post(
        "/deletion-requests",
        json={"deletion_request_id": "event", "scope": {"type": "event", "event_id": source}},
        headers=auth(key),
    )
    assert accepted.status_code == 202, accepted.text
    assert down_api.get(f"/memories/{from_event}", headers=auth(key)).status_code == 404
    assert _recalled(down_api, key, "上海静安") == {partial, unrelated}


def test_a_deletion_accepted_while_temporal_is_down_completes_once_a_worker_is_there(
    down_api: TestClient, queue: Settings, make_key: MakeKey, engine: Engine, tmp_path: Path
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = make_key(tenant=tenant)
    target = _write(down_api, key, "保险箱密码是四七一一")
    derived = _write(down_api, key, "摘要：保险箱密码")
    _cite(engine, tenant, derived, f"memory:{target}")
    first = _delete_while_down(down_api, key, target)
    # Written after the barrier by a writer that still cites the target, and one citing only that: the purge's rule.
    late = _write(down_api, key, "迟到的摘要：保险箱", source=_citing(f"memory:{target}"))
    late_of_late = _write(down_api, key, "迟到摘要的摘要", source=_citing(f"memory:{late}"))
    with tenant_session(engine, tenant) as session:
        queued = session.execute(select(DeletionOutbox)).scalars().all()
    assert [(str(row.job_id), row.attempts) for row in queued] == [(first, 1)]
    assert queued[0].last_error

    # Temporal is back: a worker drains the outbox when it starts. Nobody repeats the request.
    env = worker_env(queue, MNEMO_OUTBOX_DRAIN_SECONDS="0.5")
    worker = subprocess.Popen([MNEMO, "worker"], env=env, stdout=(tmp_path / "worker.log").open("wb"),
                              stderr=subprocess.STDOUT)
    try:
        body = wait_for(down_api, key, first, completed, timeout=90)
        # And periodically: a deletion accepted (by an API that still cannot reach Temporal) while it runs.
        later = _delete_while_down(down_api, key, _write(down_api, key, "第二个保险箱的密码"))
        wait_for(down_api, key, later, completed, timeout=60)
    finally:
        worker.terminate()
        worker.wait(30)
    assert body["fully_deleted"] is True
    layers = {layer["layer"]: layer for layer in body["layers"]}
    assert layers["derived_memories"]["evidence"]["derived_deleted"] == 3
    for memory_id in (derived, late, late_of_late):
        assert down_api.get(f"/memories/{memory_id}", headers=auth(key)).status_code == 404
    with tenant_session(engine, tenant) as session:
        assert session.execute(select(DeletionOutbox)).first() is None
        rows = session.execute(
            select(Memory.content, Memory.status).where(
                Memory.memory_id.in_([uuid.UUID(m) for m in (derived, late, late_of_late)])
            )
        ).all()
    assert rows == [("", "DELETED")] * 3
