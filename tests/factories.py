"""Request bodies the API tests build on, and scratch databases with data for the migration tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from sqlalchemy import Engine

from api.devstack.postgres import PostgresInfo
from api.settings import Settings
from memory.db import make_engine, tenant_session
from memory.enums import Category, SourceLevel, Space
from memory.identity.auth import PrincipalContext, create_api_key
from memory.store.memories import NewMemory, Source, create_memory
from migrations import upgrade


def candidate(content: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "category": "PROFILE",
        "space": "USER",
        "content": content,
        "source": {
            "source_id": "conv-1",
            "source_type": "EXPLICIT_USER_STATEMENT",
            "captured_at": "2026-06-01T09:00:00Z",
        },
        "source_level": "E2",
    }
    body.update(overrides)
    return body


def message_candidate(message: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A candidate given as the ``message`` it comes from (an EVENT), not as ``content``."""
    body = {k: v for k, v in candidate("", category="EVENT", message=message).items() if k != "content"}
    body.update(overrides)
    return body


def event(key: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotency_key": key,
        "kind": "MESSAGE",
        "payload": {"role": "user", "text": "我搬到杭州了"},
        "occurred_at": "2026-06-01T09:00:00+08:00",
        "session_id": "s-1",
    }
    body.update(overrides)
    return body


@contextmanager
def scratch_database(postgres: PostgresInfo, prefix: str) -> Iterator[str]:
    """A database of its own at the current schema (for tests that migrate, dump or swap it); dropped after.

    A restore's side database (``<name>_restoring``) is dropped too, should a failed restore leave it.
    """
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.conninfo("postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        upgrade(postgres.url(name))
        yield postgres.url(name)
    finally:
        with psycopg.connect(postgres.conninfo("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"DROP DATABASE IF EXISTS {name}_restoring WITH (FORCE)")


@contextmanager
def scratch_stack(settings: Settings, postgres: PostgresInfo, prefix: str) -> Iterator[tuple[Settings, Engine]]:
    """``settings`` on a scratch database (and a task queue) of its own, and an engine on it: for a test whose
    workflow sweeps every tenant, so that it sweeps what the test wrote, not all the session wrote before it."""
    with scratch_database(postgres, prefix) as url:
        engine = make_engine(url)
        own = settings.model_copy(update={"database_url": url, "task_queue": f"{prefix}-{uuid.uuid4().hex[:8]}"})
        try:
            yield own, engine
        finally:
            engine.dispose()


def key_in(engine: Engine, tenant_id: str, user: str = "alice", roles: tuple[str, ...] = ("memory_writer",)) -> str:
    """An API key of ``user`` in ``tenant_id``, written through ``engine`` (a scratch database's, say)."""
    with tenant_session(engine, tenant_id) as session:
        return create_api_key(session, tenant_id=tenant_id, user_id=user, roles=list(roles))


def alices_memory(engine: Engine, content: str) -> uuid.UUID:
    """One ACTIVE profile memory of user alice in tenant acme, through the real write path (key included)."""
    with tenant_session(engine, "acme") as session:
        create_api_key(session, tenant_id="acme", user_id="alice", roles=["memory_writer"])
        alice = PrincipalContext("acme", "alice", None, frozenset({"memory_writer"}), "test")
        new = NewMemory(category=Category.PROFILE, space=Space.USER, content=content,
                        source=Source("conv-1", "EXPLICIT_USER_STATEMENT", datetime(2026, 6, 1, tzinfo=UTC)),
                        source_level=SourceLevel.E2)
        return create_memory(session, alice, new).memory.memory_id
