"""Deletion verification also searches by meaning: a covered memory's vector near the probe is a hit."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete

from api.settings import Settings
from memory.db import tenant_session
from memory.deletion.verify import _vector_hits
from memory.models import Memory, MemorySearch
from tests.conftest import MakeKey
from tests.recall.conftest import embed_tenant, write


def test_a_remaining_vector_fails_verification_and_its_removal_clears_it(
    client: TestClient, make_key: MakeKey, engine: Engine, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    secret = write(client, key, "My daughter's school is Greenfield Primary")
    write(client, key, "The weekly team meeting is on Tuesdays")
    embed_tenant(recall_settings, tenant)
    covered = Memory.memory_id == uuid.UUID(secret)
    with tenant_session(engine, tenant) as session:
        assert _vector_hits(session, tenant, covered, "which school does my kid attend") == 1
        session.execute(
            delete(MemorySearch).where(MemorySearch.tenant_id == tenant, MemorySearch.memory_id == uuid.UUID(secret))
        )
        assert _vector_hits(session, tenant, covered, "which school does my kid attend") == 0
