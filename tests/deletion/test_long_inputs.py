"""Every memory can be forgotten, whatever its text: no index key made of user text may overflow a B-tree page.

Random text does not compress, so a long one used as an index key exceeds PostgreSQL's B-tree tuple
limit (2,704 bytes): a deletion whose verification probe was keyed by the whole text failed with a 500.
Every input here is the longest the API accepts for its field, of incompressible characters.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from typing import Any

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.devstack.postgres import PostgresInfo
from memory.db import make_engine, tenant_session
from memory.deletion.barrier import ScopeRequest, probe_digest, request_deletion
from memory.deletion.scope import ScopeType
from memory.identity.auth import PrincipalContext
from memory.models import DeletionProbe
from migrations import alembic_config, upgrade
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import alices_memory, candidate, event, scratch_database

_rng = random.Random(12)


def _letters(n: int) -> str:
    return "".join(_rng.choice(string.ascii_letters) for _ in range(n))


def _cjk(n: int) -> str:
    return "".join(chr(_rng.randint(0x4E00, 0x9FFF)) for _ in range(n))


def _base64(n: int) -> str:
    return base64.b64encode(_rng.randbytes(n * 3 // 4)).decode()[:n]


def _emoji(n: int) -> str:
    """Four UTF-8 bytes each: the most bytes a ``ShortText`` (256 characters) can carry."""
    return "".join(chr(_rng.randint(0x1F300, 0x1F5FF)) for _ in range(n))


def _one_word(n: int) -> str:
    """A single word of n random Cyrillic letters (two bytes each): one lexeme as long as the parser keeps."""
    return "".join(chr(_rng.randint(0x430, 0x44F)) for _ in range(n))


def _write(api: TestClient, caller: str, content: str, **overrides: Any) -> str:
    response = api.post("/memory-candidates", json=candidate(content, **overrides), headers=auth(caller))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


def _forget(api: TestClient, key: str, memory_id: str) -> None:
    accepted = api.delete(f"/memories/{memory_id}", headers=auth(key))
    assert accepted.status_code == 202, accepted.text
    assert api.get(f"/memories/{memory_id}", headers=auth(key)).status_code == 404
    body = wait_for(api, key, accepted.json()["job_id"], completed, timeout=120)
    assert body["fully_deleted"] is True


@pytest.mark.parametrize(
    "content",
    [_letters(2_800), _cjk(900), _base64(4_000), _letters(100_000), _cjk(100_000)],
    ids=["ascii-2800", "cjk-900", "base64-4000", "ascii-100k", "cjk-100k"],
)
def test_a_memory_of_long_random_text_can_be_deleted(api: TestClient, make_key: MakeKey, content: str) -> None:
    key = make_key()
    _forget(api, key, _write(api, key, content))


def test_a_subject_deletion_of_a_user_with_long_random_memories_completes(api: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    alice, admin = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="root", roles=("admin",))
    for content in (_letters(2_800), _cjk(900), _base64(4_000)):
        _write(api, alice, content)
    payload = {"role": "user", "text": _cjk(3_000), "attachment": _base64(8_000)}
    assert api.post("/memory-events", json=event("long", payload=payload), headers=auth(alice)).status_code == 201
    accepted = api.post(
        "/deletion-requests",
        json={"deletion_request_id": "gdpr-alice", "scope": {"type": "subject", "user_id": "alice"}},
        headers=auth(admin),
    )
    assert accepted.status_code == 202, accepted.text
    assert wait_for(api, admin, accepted.json()["job_id"], completed, timeout=120)["fully_deleted"] is True


def test_the_longest_keys_and_ids_the_api_accepts_can_be_written_and_deleted(
    api: TestClient, make_key: MakeKey
) -> None:
    """Every text the API lets into a B-tree key, at its longest and least compressible, next to one long lexeme:
    memory key, session id (in the postings' audience), idempotency keys, deletion request ids, session scopes."""
    key = make_key()
    session_id, long_id = _emoji(256), _emoji(256)
    memory_id = _write(
        api, key, f"{_one_word(1_020)} {_letters(2_040)} {_cjk(400)}",
        space="SESSION", session_id=session_id, key=_emoji(256), idempotency_key=long_id,
    )
    event_body = event(_emoji(256), session_id=session_id, payload={"text": _letters(2_040)})
    assert api.post("/memory-events", json=event_body, headers=auth(key)).status_code == 201
    accepted = api.post(
        "/deletion-requests",
        json={"deletion_request_id": long_id, "scope": {"type": "session", "session_id": session_id}},
        headers=auth(key),
    )
    assert accepted.status_code == 202, accepted.text
    assert api.get(f"/memories/{memory_id}", headers=auth(key)).status_code == 404
    assert wait_for(api, key, accepted.json()["job_id"], completed, timeout=120)["fully_deleted"] is True
    again = api.delete(
        f"/memories/{_write(api, key, _cjk(2_000))}", headers=auth(key), params={"deletion_request_id": _emoji(256)}
    )
    assert again.status_code == 202, again.text
    assert wait_for(api, key, again.json()["job_id"], completed, timeout=120)["fully_deleted"] is True


def test_0012_keys_the_probes_of_pending_jobs_by_their_digest(postgres: PostgresInfo) -> None:
    """Probes stored before 0012 (keyed by their text) get the digest the barrier now writes, and keep their text."""
    with scratch_database(postgres, "mnemo_probes") as url:
        engine = make_engine(url, pool_size=1)
        memory = alices_memory(engine, "Mein Passwort ist Kartoffelsalat")
        alice = PrincipalContext("acme", "alice", None, frozenset({"memory_writer"}), "test")
        with tenant_session(engine, "acme") as session:
            request_deletion(session, alice, "d-1", ScopeRequest(ScopeType.MEMORY, memory_id=memory), "sha")
        command.downgrade(alembic_config(url), "0011")
        upgrade(url)
        with tenant_session(engine, "acme") as session:
            rows = session.execute(select(DeletionProbe.probe, DeletionProbe.probe_sha256)).all()
        engine.dispose()
    assert rows and all(digest == probe_digest(probe) for probe, digest in rows)
    assert "Mein Passwort ist Kartoffelsalat" in {probe for probe, _ in rows}
