"""The vector walk refuses other audiences' rows on the projection row (migration 0033); the hard filters stay exact.

A walk reads only rows whose ``audience`` is one the caller belongs to (or not yet filled); the hard
filters still decide every row. Property-style over spaces, owners, agents and sessions: for every
caller, the walk, the exact scan and the source as recall calls it return exactly the rows the hard
filters allow (every one of them: the limit is above their number), before and during the migration's
fill; the write path and the migration's SQL give every space the same audience; and the walk never
joins another audience's row to its memory.
"""

from __future__ import annotations

import importlib
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from api.settings import Settings
from memory.db import global_session, tenant_session
from memory.embedders.engine import MODEL_NAME, default_embedder
from memory.identity.auth import PrincipalContext, authenticate
from memory.models import Memory, MemorySearch
from memory.recall import candidates as cand
from memory.store.visibility import NOW, QueryFilters, hard_filters
from tests.conftest import MakeKey
from tests.recall.conftest import embed_tenant, explained, plan_total, write

QUERY = "Where did we put the lighthouse keeper's logbook?"
WRITERS = {  # who may write in which space (TENANT and SYSTEM need an admin; AGENT an agent credential)
    "USER": ("alice", "bob"), "SESSION": ("alice", "bob", "planner"), "AGENT": ("planner", "critic"),
    "TENANT": ("admin",), "SYSTEM": ("admin",),
}
CALLERS = [("alice", None), ("alice", "s1"), ("bob", None), ("bob", "s1"), ("planner", None), ("planner", "s2"),
           ("critic", "s1"), ("carol", None)]
"""Callers and their session: users, agents of alice's, a new user; "s1" is a session id both alice and bob use."""


@pytest.fixture(scope="module")
def mixed(client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings,
          engine: Engine) -> dict[str, Any]:
    """24 notes on the same subject, each in a space, by an owner and in a session drawn with a fixed seed."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    keys = {"admin": make_key(tenant=tenant, user="root", roles=("memory_writer", "admin")),
            "alice": make_key(tenant=tenant, user="alice"), "bob": make_key(tenant=tenant, user="bob"),
            "planner": make_key(tenant=tenant, user="alice", agent="planner"),
            "critic": make_key(tenant=tenant, user="alice", agent="critic"),
            "carol": make_key(tenant=tenant, user="carol")}
    draw = random.Random(28)
    for n in range(24):
        space = draw.choice(sorted(WRITERS))
        extra: dict[str, Any] = {"space": space}
        if space in ("TENANT", "SYSTEM", "AGENT"):
            extra["category"] = "CASE"
        if space == "SESSION":
            extra["session_id"] = draw.choice(("s1", "s2"))
        write(client, keys[draw.choice(WRITERS[space])], f"{QUERY} Note {n}: it was on shelf {draw.randint(1, 9)}.",
              **extra)
    embed_tenant(recall_settings, tenant)
    with global_session(engine) as session:
        principals = {name: authenticate(session, key) for name, key in keys.items()}
    return {"tenant": tenant, "principals": principals, "vector": cand.vector_text(default_embedder().embed_one(QUERY))}


def _visible(session: Session, principal: PrincipalContext, filters: QueryFilters) -> set[str]:
    """What the hard filters let the caller use, among rows with a current vector: the whole truth."""
    rows = session.execute(
        select(Memory.memory_id).join(MemorySearch, (MemorySearch.tenant_id == Memory.tenant_id)
                                      & (MemorySearch.memory_id == Memory.memory_id))
        .where(hard_filters(principal, filters, NOW), MemorySearch.embedding_revision == Memory.revision),
        {"now": datetime.now(UTC)}).scalars()
    return {str(memory_id) for memory_id in rows}


def _found(session: Session, principal: PrincipalContext, filters: QueryFilters, vector: str) -> dict[str, set[str]]:
    now = datetime.now(UTC)
    with cand.index_first(session, 50):
        walk, exact = (cand._nearest(session, principal, filters, vector, MODEL_NAME, now, 50, exact=exact)
                       for exact in (False, True))
    source = cand.vector_candidates(session, principal, filters, vector, MODEL_NAME, now, 50)
    return {"walk": {str(r.memory_id) for r in walk}, "exact": {str(r.memory_id) for r in exact},
            "source": {str(c.memory_id) for c in source}}


@pytest.mark.parametrize(("caller", "session_id"), CALLERS)
def test_every_caller_gets_exactly_every_row_the_hard_filters_allow(
    engine: Engine, mixed: dict[str, Any], caller: str, session_id: str | None
) -> None:
    principal, filters = mixed["principals"][caller], QueryFilters(session_id=session_id)
    with tenant_session(engine, mixed["tenant"]) as session:
        truth = _visible(session, principal, filters)
        assert _found(session, principal, filters, mixed["vector"]) == {"walk": truth, "exact": truth, "source": truth}
        # Half filled by the migration (the other half NULL: anyone's): the same answers.
        with session.begin_nested() as halfway:
            session.execute(text("UPDATE memory_search SET audience = NULL WHERE memory_id::text < '8'"))
            assert session.execute(text("SELECT count(*) FROM memory_search WHERE audience IS NULL")).scalar_one()
            assert _found(session, principal, filters, mixed["vector"]) == {"walk": truth, "exact": truth,
                                                                            "source": truth}
            halfway.rollback()
    if caller != "carol":
        assert truth  # every caller but the new user sees something here, so the property is not vacuous


def test_the_write_path_and_migration_0033_give_every_space_the_same_audience(
    engine: Engine, mixed: dict[str, Any]
) -> None:
    migration = importlib.import_module("migrations.versions.0033_search_audience")
    with tenant_session(engine, mixed["tenant"]) as session:
        rows = session.execute(text(
            f"SELECT s.audience, {migration.AUDIENCE}, l.audience FROM memory_search s"
            " JOIN memories m ON m.tenant_id = s.tenant_id AND m.memory_id = s.memory_id AND m.version = s.version"
            " JOIN memory_lexemes l ON l.tenant_id = s.tenant_id AND l.memory_id = s.memory_id"
        )).all()
    assert {written for written, _, _ in rows} >= {"", "USER:alice", "USER:bob", "AGENT:planner", "SESSION:alice/s1"}
    assert all(written == derived == posting for written, derived, posting in rows)


@pytest.fixture
def memories_joined(engine: Engine) -> Iterator[list[int]]:
    """Per vector walk run meanwhile: how many walked rows were joined to their memory (EXPLAIN ANALYZE, re-run)."""
    loops = partial(plan_total, relation="memories", of=lambda plan: plan["Actual Loops"])
    with explained(engine, "max_walk", loops) as joined:
        yield joined


def test_the_walk_never_joins_another_audiences_row(
    engine: Engine, mixed: dict[str, Any], memories_joined: list[int]
) -> None:
    principal = mixed["principals"]["bob"]
    with tenant_session(engine, mixed["tenant"]) as session:
        mine = session.execute(text("SELECT count(*) FROM memory_search WHERE audience IN ('', 'USER:bob')"
                                    " AND embedding IS NOT NULL")).scalar_one()
        every = session.execute(text("SELECT count(*) FROM memory_search WHERE embedding IS NOT NULL")).scalar_one()
        with cand.index_first(session, 50):
            cand._nearest(session, principal, QueryFilters(), mixed["vector"], MODEL_NAME, datetime.now(UTC), 50,
                          exact=False)
    assert 0 < mine < every
    assert memories_joined == [mine]  # every other audience's row refused on the projection row, never joined
