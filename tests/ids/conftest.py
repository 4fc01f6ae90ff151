"""One API with its own real worker for the id-ownership tests, and what "nothing was written" reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.settings import Settings
from memory.db import tenant_session
from tests.workers import api_with_worker


@pytest.fixture(scope="package")
def ids_api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "ids") as client:
        yield client


_WRITTEN = {
    "jobs": "SELECT job_id, status FROM deletion_jobs ORDER BY job_id",
    "tombstones": "SELECT target_type, target_id, owner_user_id, revision FROM tombstones ORDER BY 1, 2, 3",
    "audit": "SELECT action, actor, detail::text FROM audit_log ORDER BY 1, 2, 3",
    "outbox": "SELECT job_id FROM deletion_outbox ORDER BY 1",
    "epochs": "SELECT user_id, deletion_epoch FROM subject_epochs ORDER BY 1",
    "probes": "SELECT probe_sha256 FROM deletion_probes ORDER BY 1",
    "memories": "SELECT memory_id, version, status FROM memories ORDER BY 1, 2",
}


def written(engine: Engine, tenant: str) -> dict[str, Any]:
    """Everything a deletion request could write in ``tenant``, read straight from the database."""
    with tenant_session(engine, tenant) as session:
        return {name: [tuple(row) for row in session.execute(text(sql)).all()] for name, sql in _WRITTEN.items()}
