"""Retention holds are admin actions and are audited, like keys and policies (issue 12, deliver 4).

Before the fix neither ``POST /retention-holds`` nor its release wrote an audit row.
"""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from memory.db import tenant_session
from memory.models import AuditEntry
from tests.conftest import MakeKey, auth


def _hold_rows(engine: Engine, tenant: str) -> list[tuple[str, str, dict[str, object]]]:
    with tenant_session(engine, tenant) as session:
        rows = session.execute(
            select(AuditEntry.action, AuditEntry.actor, AuditEntry.detail)
            .where(AuditEntry.tenant_id == tenant, AuditEntry.action.like("RETENTION_HOLD_%"))
            .order_by(AuditEntry.audit_id)
        ).all()
    return [(row.action, row.actor, row.detail) for row in rows]


def test_creating_and_releasing_a_hold_is_audited_once_each(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, user="legal", roles=("admin",))
    key_id = admin.split("_")[1]
    created = client.post("/retention-holds", json={"user_id": "dana", "reason": "litigation"}, headers=auth(admin))
    assert created.status_code == 201, created.text
    hold_id = created.json()["hold_id"]
    detail = {"hold_id": hold_id, "user_id": "dana", "reason": "litigation", "key_id": key_id}
    assert _hold_rows(engine, tenant) == [("RETENTION_HOLD_CREATED", "legal", detail)]

    for _ in range(2):  # the second release lifts nothing, so it is not a second action
        released = client.post(f"/retention-holds/{hold_id}/release", headers=auth(admin))
        assert released.status_code == 200, released.text
    assert _hold_rows(engine, tenant) == [
        ("RETENTION_HOLD_CREATED", "legal", detail), ("RETENTION_HOLD_RELEASED", "legal", detail)
    ]


def test_a_refused_hold_writes_no_audit_row(client: TestClient, make_key: MakeKey, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    writer = make_key(tenant=tenant, user="bob", roles=("memory_writer",))
    refused = client.post("/retention-holds", json={"user_id": "dana", "reason": "litigation"}, headers=auth(writer))
    assert refused.status_code == 403, refused.text
    assert _hold_rows(engine, tenant) == []
