"""A deletion of a subject with many words: the barrier's fingerprints are read and hashed in the CPU pool (the API's
interpreter decoded thousands of payloads before, issue 23, finding 7), and they are the same as in place."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from memory import offload
from memory.db import tenant_session
from memory.deletion import deleted_texts
from memory.deletion.deleted_texts import OFFLOAD_FROM_CHARS, _fingerprints_keeping, _OthersKept, fingerprint_columns
from memory.deletion.fingerprints import salt_of
from tests.conftest import MakeKey, auth
from tests.deletion.conftest import completed, wait_for
from tests.factories import candidate
from tests.sessions.conftest import post, say

SPARE_KEY = "I keep the spare key of the flat under the blue flowerpot by the door"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions sent to the CPU pool with a transaction of their own, in order."""
    names: list[str] = []
    real = offload.in_tenant

    def watched(engine: Engine, tenant_id: str, fn: Any, /, *args: object, **options: Any) -> Any:
        names.append(fn.__name__)
        return real(engine, tenant_id, fn, *args, **options)

    monkeypatch.setattr(offload, "in_tenant", watched)
    return names


def _chatty_subject(api: TestClient, key: str) -> None:
    """300 messages of the subject's (well over OFFLOAD_FROM_CHARS), one of them repeating the memory's words."""
    post(api, key, "chat", *(say(f"m{n}", "user", f"第{n}条：下周去上海出差，预算八千，住在外滩附近的酒店 {n}" * 3)
                             for n in range(300)))
    post(api, key, "chat", say("again", "user", SPARE_KEY))


def test_a_subjects_kept_words_read_in_the_pool_give_the_fingerprints_made_in_place(
    api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    assert offload.pooled()  # the API started its pool
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    _chatty_subject(api, key)
    others = _OthersKept(tenant, "alice", frozenset(), frozenset())
    salt = salt_of(uuid.uuid4())
    texts = [SPARE_KEY, "下周去上海出差", "my locker code is 4711 and nobody else knows it"]
    with tenant_session(engine, tenant) as session:
        assert others.size(session) >= OFFLOAD_FROM_CHARS
        kept = others.read(session)
        in_place = fingerprint_columns(salt, texts, kept)
    pooled = offload.in_tenant(engine, tenant, _fingerprints_keeping, salt, texts, [], others)
    assert sorted(zip(*pooled, strict=True)) == sorted(zip(*in_place, strict=True))  # rows; their order is a set's
    # Words the subject said again elsewhere have no fingerprint; the words only the deleted text holds do.
    assert in_place[2] and fingerprint_columns(salt, texts[:2], kept) == ([], [], [])


def test_a_memory_deletion_of_a_chatty_subject_reads_its_kept_words_in_the_pool_and_completes_clean(
    api: TestClient, make_key: MakeKey, sent: list[str]
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    _chatty_subject(api, key)
    memory = api.post("/memory-candidates", json=candidate(SPARE_KEY), headers=auth(key))
    assert memory.status_code == 201, memory.text
    deletion = api.delete(f"/memories/{memory.json()['memory_id']}", headers=auth(key))
    assert deletion.status_code == 202, deletion.text
    assert "_fingerprints_keeping" in sent
    job = wait_for(api, key, deletion.json()["job_id"], completed, timeout=60)
    # The message saying the same words is the subject's own, kept: never reported as a copy of the memory.
    assert job["fully_deleted"] is True and job["remaining_copies"] == [], job


LIKE = "我喜欢喝咖啡，尤其是早上在阳台上慢慢喝一杯手冲的埃塞俄比亚咖啡"


def test_a_chatty_subjects_dont_remember_reads_its_kept_words_in_its_own_transaction_and_completes_clean(
    api: TestClient, make_key: MakeKey, sent: list[str]
) -> None:
    """The message saying "别记住 ..." is stored in the same transaction as the deletion it asks for: another
    connection (the pool's) cannot see it, so its words would be fingerprinted as deleted and the scan would report
    the instruction itself as a copy (found by a review of the pool read)."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    _chatty_subject(api, key)
    made = api.post("/memory-candidates", json=candidate(LIKE, category="PREFERENCE"), headers=auth(key))
    assert made.status_code == 201, made.text
    answer = api.post("/sessions/chat/messages", headers=auth(key),
                      json={"messages": [say("forget", "user", f"别记住{LIKE}。")]})
    assert answer.status_code == 201, answer.text
    [forgotten] = answer.json()["forgotten"]
    assert "_fingerprints_keeping" not in sent
    job_id = forgotten["job_id"] if isinstance(forgotten, dict) else forgotten
    job = wait_for(api, key, job_id, completed, timeout=90)
    assert job["fully_deleted"] is True and job["remaining_copies"] == [], job


def test_a_barrier_the_pool_keeps_waiting_past_its_patience_hashes_in_place_and_completes_clean(
    api: TestClient, make_key: MakeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool runs in the idle class and may be starved; the barrier holds the subject's epoch meanwhile, so it
    waits only so long, then does the work itself (with the same outcome)."""
    monkeypatch.setattr(deleted_texts, "BARRIER_PATIENCE_SECONDS", 0.0)
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    _chatty_subject(api, key)
    memory = api.post("/memory-candidates", json=candidate(SPARE_KEY), headers=auth(key))
    deletion = api.delete(f"/memories/{memory.json()['memory_id']}", headers=auth(key))
    assert deletion.status_code == 202, deletion.text
    job = wait_for(api, key, deletion.json()["job_id"], completed, timeout=60)
    assert job["fully_deleted"] is True and job["remaining_copies"] == [], job
