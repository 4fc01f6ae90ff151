"""Two sessions posting one idempotency key at the same moment: the second gets the 409 of a taken key, not a
500 (the bench hit it: both speaker sides of a LoCoMo conversation post the same keys at once)."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from memory.db import tenant_session
from memory.errors import IdempotencyConflict
from memory.identity.auth import PrincipalContext
from memory.sessions import store
from memory.sessions.messages import MessageRole
from memory.store.events import request_digest
from tests.conftest import MakeKey


def test_a_key_taken_by_a_concurrent_transaction_is_a_conflict_not_a_crash(engine: Engine, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    alice = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), key_id="test")
    message = store.NewMessage("shared-key", MessageRole.USER, "hello", datetime.now(UTC))
    digest = request_digest({"content": "hello"})
    for session_id in ("s-a", "s-b"):
        with tenant_session(engine, tenant) as session:
            store.open_session(session, alice, store.NewSession(session_id), digest)
    outcome: list[BaseException | None] = []
    first_holds_the_key = threading.Event()
    release = threading.Event()

    def first() -> None:
        with tenant_session(engine, tenant) as session:
            store.append_messages(session, alice, "s-a", [message], [digest])
            first_holds_the_key.set()
            release.wait(10)

    def second() -> None:
        try:
            with tenant_session(engine, tenant) as session:
                store.append_messages(session, alice, "s-b", [message], [digest])
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    one = threading.Thread(target=first)
    one.start()
    assert first_holds_the_key.wait(10)
    two = threading.Thread(target=second)
    two.start()
    two.join(1.0)  # it waits on the first transaction's uncommitted key
    release.set()
    one.join(10)
    two.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], IdempotencyConflict), outcome
    # and afterwards, as before, the plain check says so too
    with pytest.raises(IdempotencyConflict), tenant_session(engine, tenant) as session:
        store.append_messages(session, alice, "s-b", [message], [digest])
