"""Audiences: full-text postings split by who may see a memory (``memory.store.audience``, migration 0009).

A caller walks only the postings of the audiences they belong to; the hard filters still
decide every row. These tests pin both sides: the audiences lose nothing visibility allows
(every space, with and without a session, with an agent credential), and another user's
postings are not even read.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text

from memory.db import global_session, tenant_session
from memory.identity.auth import PrincipalContext, authenticate
from memory.models import Memory
from memory.recall import candidates as cand
from memory.store.visibility import NOW, QueryFilters, hard_filters
from memory.text import search_terms
from tests.conftest import MakeKey
from tests.recall.conftest import explained, plan_total, write

WORD = "zephyr"


@pytest.fixture(scope="module")
def spaces(client: TestClient, make_key: MakeKey, engine: Engine) -> dict[str, Any]:
    """One note with the same word in every space: shared, Alice's, her two sessions', her agent's, Bob's (many)."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    keys = {
        "admin": make_key(tenant=tenant, user="root", roles=("memory_writer", "admin")),
        "alice": make_key(tenant=tenant, user="alice"),
        "planner": make_key(tenant=tenant, user="alice", agent="planner"),
        "bob": make_key(tenant=tenant, user="bob"),
    }
    notes = {
        "alice": write(client, keys["alice"], f"{WORD} note of Alice"),
        "tenant": write(client, keys["admin"], f"{WORD} note for everyone", space="TENANT", category="CASE"),
        "system": write(client, keys["admin"], f"{WORD} note of the system", space="SYSTEM", category="CASE"),
        "session s1": write(client, keys["alice"], f"{WORD} note in session one", space="SESSION", session_id="s1"),
        "session s2": write(client, keys["alice"], f"{WORD} note in session two", space="SESSION", session_id="s2"),
        "agent": write(client, keys["planner"], f"{WORD} note of the planner agent", space="AGENT", category="CASE"),
    }
    # Bob's notes are the newest: a walk of the whole tenant would read them before any of Alice's.
    bobs = [write(client, keys["bob"], f"{WORD} note {n} of Bob") for n in range(12)]
    with global_session(engine) as session:
        principals = {name: authenticate(session, key) for name, key in keys.items()}
    return {"tenant": tenant, "principals": principals, "notes": notes, "bobs": bobs}


def _fulltext(engine: Engine, tenant: str, principal: PrincipalContext, filters: QueryFilters) -> set[str]:
    with tenant_session(engine, tenant) as session:
        found = cand.fulltext_candidates(session, principal, filters, search_terms(WORD), datetime.now(UTC), 20)
    return {str(c.memory_id) for c in found}


def _visible(engine: Engine, tenant: str, principal: PrincipalContext, filters: QueryFilters) -> set[str]:
    """What the hard filters let the caller use at all: the truth the audiences must not narrow."""
    with tenant_session(engine, tenant) as session:
        rows = session.execute(select(Memory.memory_id).where(hard_filters(principal, filters, NOW)),
                               {"now": datetime.now(UTC)}).scalars()
        return {str(memory_id) for memory_id in rows}


@pytest.mark.parametrize(
    ("caller", "session_id", "expected"),
    [
        ("alice", None, {"alice", "tenant", "system"}),
        ("alice", "s1", {"alice", "tenant", "system", "session s1"}),
        ("planner", None, {"alice", "tenant", "system", "agent"}),
        ("planner", "s2", {"alice", "tenant", "system", "agent", "session s2"}),
        ("bob", None, {"tenant", "system", "bobs"}),
    ],
)
def test_the_walk_finds_every_visible_match_in_every_space(
    engine: Engine, spaces: dict[str, Any], caller: str, session_id: str | None, expected: set[str]
) -> None:
    principal = spaces["principals"][caller]
    filters = QueryFilters(session_id=session_id)
    found = _fulltext(engine, spaces["tenant"], principal, filters)
    bobs = set(spaces["bobs"]) if "bobs" in expected else set()
    want = {spaces["notes"][name] for name in expected - {"bobs"}} | bobs
    assert found == want
    assert found == _visible(engine, spaces["tenant"], principal, filters)


def test_the_write_path_and_migration_0009_give_every_space_the_same_audience(
    engine: Engine, spaces: dict[str, Any]
) -> None:
    migration = importlib.import_module("migrations.versions.0009_posting_audiences")
    with tenant_session(engine, spaces["tenant"]) as session:
        rows = session.execute(text(
            f"SELECT DISTINCT l.audience, {migration.AUDIENCE} FROM memory_lexemes l"
            " JOIN memories m ON m.tenant_id = l.tenant_id AND m.memory_id = l.memory_id AND m.version = l.version"
        )).all()
    assert {written for written, _ in rows} == {"", "USER:alice", "USER:bob", "SESSION:alice/s1", "SESSION:alice/s2",
                                                "AGENT:planner"}
    assert all(written == derived for written, derived in rows)


@pytest.fixture
def postings_read(engine: Engine) -> Iterator[list[int]]:
    """Rows each full-text statement read from ``memory_lexemes``, from its real plan (EXPLAIN ANALYZE, re-run)."""
    rows = partial(plan_total, relation="memory_lexemes", of=lambda plan: plan["Actual Rows"] * plan["Actual Loops"])
    with explained(engine, "memory_lexemes", rows) as read:
        yield read


def test_a_users_walk_never_reads_another_users_postings(
    engine: Engine, spaces: dict[str, Any], postings_read: list[int]
) -> None:
    found = _fulltext(engine, spaces["tenant"], spaces["principals"]["alice"], QueryFilters())
    assert found == {spaces["notes"][name] for name in ("alice", "tenant", "system")}
    # One posting each of Alice's, the shared and the system note: Bob's twelve newer ones are never read
    # (before the split, the walk read them first and refused them one by one).
    assert postings_read == [3]
