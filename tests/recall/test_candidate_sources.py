"""The index-driven candidate sources: the HNSW walk, its exact fallback, the lexical cap, the scoped view.

Each source reads the index first and joins each hit to its memory under the hard
filters in the same statement. These tests pin what that must never change: a row
the caller may not use never takes a visible row's place, whatever its distance
or however the walk or the cap ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, event, func, select, text
from sqlalchemy.orm import Session

from api.devstack.postgres import PostgresInfo
from api.settings import Settings
from memory.db import global_session, make_engine, tenant_session
from memory.embedders.engine import MODEL_NAME, default_embedder
from memory.identity.auth import PrincipalContext
from memory.models import scoped_search
from memory.recall import candidates as cand
from memory.store.visibility import QueryFilters
from memory.text import search_terms
from tests.conftest import MakeKey, auth
from tests.recall.conftest import embed_tenant, recall, write

QUERY = "Where does the user keep the spare house keys?"
ALICE_TEXTS = [
    "The spare keys are in the blue bowl by the front door.",
    "The user keeps a house key with the neighbour, Mrs Chen.",
    "The car key hangs on the hook in the garage.",
    "The user prefers tea without sugar in the morning.",
    "The office badge is in the laptop bag.",
    "The user stores passwords in a password manager.",
    "The garden shed padlock code is written in the notebook.",
    "The user walks the dog every evening at seven.",
]


def _principal(tenant: str, user: str) -> PrincipalContext:
    return PrincipalContext(tenant_id=tenant, user_id=user, agent_id=None, roles=frozenset({"memory_writer"}),
                            key_id="test")


@pytest.fixture(scope="module")
def corpus(client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings) -> dict[str, object]:
    """Alice's eight memories; Bob (same tenant) and a stranger (another tenant) hold the query itself, six times.

    Bob writes first, so his rows come first in the table (and in a bitmap scan of an index).
    """
    tenant, other_tenant = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    stranger = make_key(tenant=other_tenant, user="alice")
    for key in (bob, stranger):
        for n in range(6):
            write(client, key, f"{QUERY} ({n})")
    mine = {write(client, alice, text) for text in ALICE_TEXTS}
    embed_tenant(recall_settings, tenant)
    embed_tenant(recall_settings, other_tenant)
    return {"tenant": tenant, "other_tenant": other_tenant, "mine": mine,
            "vector": default_embedder().embed_one(QUERY)}


def _vector(
    engine: Engine, corpus: dict[str, object], limit: int, max_scan_tuples: int | None = None
) -> list[cand.Candidate]:
    now = datetime.now(UTC)
    with tenant_session(engine, str(corpus["tenant"])) as session:
        if max_scan_tuples is not None:  # how far pgvector's own iterative walk may go
            session.execute(text(f"SET LOCAL hnsw.max_scan_tuples = {max_scan_tuples}"))
        return cand.vector_candidates(session, _principal(str(corpus["tenant"]), "alice"), QueryFilters(),
                                      cand.vector_text(corpus["vector"]), MODEL_NAME, now, limit)  # type: ignore[arg-type]


def _exact(engine: Engine, corpus: dict[str, object], limit: int) -> list[str]:
    now = datetime.now(UTC)
    with tenant_session(engine, str(corpus["tenant"])) as session:
        rows = cand._nearest(session, _principal(str(corpus["tenant"]), "alice"), QueryFilters(),
                             cand.vector_text(corpus["vector"]), MODEL_NAME, now, limit, exact=True)  # type: ignore[arg-type]
    return [str(r.memory_id) for r in rows]


def test_the_index_walk_returns_the_nearest_visible_rows_never_a_closer_filtered_one(
    engine: Engine, corpus: dict[str, object]
) -> None:
    found = _vector(engine, corpus, limit=5)
    assert len(found) == 5
    assert {str(c.memory_id) for c in found} <= corpus["mine"]  # type: ignore[operator]
    assert [str(c.memory_id) for c in found] == _exact(engine, corpus, 5)
    semantics = []
    for c in found:
        assert c.semantic is not None  # every vector candidate carries its similarity
        semantics.append(c.semantic)
    assert semantics == sorted(semantics, reverse=True)


def test_a_walk_that_ends_before_the_limit_falls_back_to_the_exact_scan(
    engine: Engine, corpus: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bob's six rows are the query itself, so a walk of three reads only rows Alice may not use.
    # pgvector's walk is bounded the same way, so the fallback must not walk the index again.
    monkeypatch.setattr(cand, "MAX_WALK", 3)
    found = _vector(engine, corpus, limit=5, max_scan_tuples=3)
    assert [str(c.memory_id) for c in found] == _exact(engine, corpus, 5)
    assert len(found) == 5


@pytest.fixture
def vector_statements() -> Iterator[list[str]]:
    """Each vector statement run meanwhile, on any engine (the API's too): "walk" (with its row limit) or "exact"."""
    ran: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        # the memory source's vector statements: not the re-read's cosine, nor published knowledge's own source
        if "<=>" in statement and "memory_usage" not in statement and "knowledge_items" not in statement:
            ran.append("walk" if "max_walk" in statement else "exact")

    event.listen(Engine, "before_cursor_execute", record)
    yield ran
    event.remove(Engine, "before_cursor_execute", record)


def test_a_caller_who_sees_few_of_the_tenants_rows_gets_the_exact_scan_without_walking(
    engine: Engine, corpus: dict[str, object], monkeypatch: pytest.MonkeyPatch, vector_statements: list[str]
) -> None:
    tenant = str(corpus["tenant"])
    monkeypatch.setattr(cand, "SPARSE", 10**6)  # no table here is that large: the caller's own count decides
    with tenant_session(engine, tenant) as session:
        # Alice sees 8 of the tenant's 14 rows: a walk finds hers at once. Carol, new, sees none of them.
        assert not cand.sees_few(session, _principal(tenant, "alice"))
        assert cand.sees_few(session, _principal(tenant, "carol"))
    monkeypatch.setattr(cand, "SPARSE", 1)  # now 8 of 14 counts as sparse
    found = _vector(engine, corpus, limit=5)
    assert vector_statements == ["exact"]
    assert [str(c.memory_id) for c in found] == _exact(engine, corpus, 5)


def test_a_caller_who_sees_much_of_a_small_tenant_beside_larger_ones_gets_the_exact_scan(
    postgres: PostgresInfo, engine: Engine, corpus: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk reads every tenant's rows of the shared index: a small tenant in a large table is sparse in it."""
    owner = create_engine(postgres.url(), isolation_level="AUTOCOMMIT")
    try:
        with owner.connect() as connection:  # the table's row estimate, as autovacuum would leave it
            connection.execute(text("ANALYZE memory_search"))
    finally:
        owner.dispose()
    tenant = str(corpus["tenant"])
    monkeypatch.setattr(cand, "SPARSE", 2)
    with tenant_session(engine, tenant) as session:
        # 8 of the tenant's 14 rows are Alice's: within the tenant, not under 1 in 2. The table holds the stranger's
        # six and every other test's rows besides: more than 16.
        assert session.execute(select(func.count()).select_from(scoped_search)).scalar_one() == 14
        assert cand.sees_few(session, _principal(tenant, "alice"))


def test_a_new_users_recall_runs_the_exact_scan_once_and_never_walks(
    client: TestClient, make_key: MakeKey, corpus: dict[str, object], vector_statements: list[str]
) -> None:
    carol = make_key(tenant=str(corpus["tenant"]), user="carol")
    bundle = recall(client, carol, query=QUERY)
    assert bundle["items"] == []  # everything here is Alice's or Bob's
    assert vector_statements == ["exact"]  # decided while the query embedded; no second exact scan either


@pytest.mark.parametrize(("query", "matches"), [("spare kyes", True), ("neighbour Chenn", True),
                                                ("pasword manager", True), ("garaje", False)])  # 0.57 to "garage"
def test_comparing_a_few_rows_one_by_one_gives_the_trigram_indexs_answer(
    engine: Engine, corpus: dict[str, object], query: str, matches: bool
) -> None:
    tenant, now = str(corpus["tenant"]), datetime.now(UTC)

    def trigram(session: Session, few: bool) -> list[tuple[str, float]]:
        found = cand.trigram_candidates(session, _principal(tenant, "alice"), QueryFilters(), query, now, 20, few)
        return [(str(c.memory_id), c.trigram) for c in found]

    fresh = make_engine(engine.url.render_as_string(hide_password=False), pool_size=1)
    try:
        with tenant_session(fresh, tenant) as session:  # a new connection: pg_trgm is not loaded in it yet
            one_by_one = trigram(session, few=True)
    finally:
        fresh.dispose()
    with tenant_session(engine, tenant) as session:
        via_index = trigram(session, few=False)
    assert bool(via_index) is matches and set(dict(via_index)) <= corpus["mine"]  # type: ignore[operator]
    assert one_by_one == via_index  # the same threshold, the same scores, the same order


def test_the_lexical_cap_counts_only_rows_that_passed_the_hard_filters(
    engine: Engine, corpus: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cand, "EXAMINED_PER_CANDIDATE", 1)
    now = datetime.now(UTC)
    with tenant_session(engine, str(corpus["tenant"])) as session:
        found = cand.fulltext_candidates(session, _principal(str(corpus["tenant"]), "alice"), QueryFilters(),
                                         search_terms("keys key house"), now, 2)
    # Bob's six matching rows come first in the table; still the cap's two rows are Alice's.
    assert len(found) == 2
    assert {str(c.memory_id) for c in found} <= corpus["mine"]  # type: ignore[operator]


def test_the_scoped_view_shows_only_the_transactions_tenant(engine: Engine, corpus: dict[str, object]) -> None:
    with tenant_session(engine, str(corpus["tenant"])) as session:
        per_tenant = select(scoped_search.c.tenant_id, func.count()).group_by(scoped_search.c.tenant_id)
        tenants = session.execute(per_tenant).all()
    assert tenants == [(corpus["tenant"], len(ALICE_TEXTS) + 6)]
    with global_session(engine) as session:
        assert session.execute(select(func.count()).select_from(scoped_search)).scalar_one() == 0


@pytest.fixture(scope="module")
def budget_notes(client: TestClient, make_key: MakeKey) -> dict[str, Any]:
    """Alice: one old note naming Kepler, then eight budget notes; then Bob (same tenant) writes eight newer ones."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    kepler = write(client, alice, "The Kepler budget is frozen until March")
    notes = [write(client, alice, f"Budget note number {n} for the quarter") for n in range(8)]
    for n in range(8):
        write(client, bob, f"Budget note number {n} for the quarter, from Bob")
    return {"tenant": tenant, "kepler": kepler, "notes": notes}


def _fulltext(engine: Engine, notes: dict[str, Any], query: str, limit: int) -> list[str]:
    now = datetime.now(UTC)
    with tenant_session(engine, notes["tenant"]) as session:
        found = cand.fulltext_candidates(session, _principal(notes["tenant"], "alice"), QueryFilters(),
                                         search_terms(query), now, limit)
    return [str(c.memory_id) for c in found]


def test_a_common_term_contributes_its_newest_visible_matches(
    engine: Engine, budget_notes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cand, "EXAMINED_PER_CANDIDATE", 1)  # one term, limit 5: its 5 newest postings
    found = _fulltext(engine, budget_notes, "budget", 5)
    # Bob's eight notes are newer still, but are not Alice's to see: they never take a place.
    assert set(found) == set(budget_notes["notes"][-5:])


def test_a_rare_term_finds_an_old_memory_past_a_common_terms_newest(
    engine: Engine, budget_notes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cand, "EXAMINED_PER_CANDIDATE", 1)
    assert budget_notes["kepler"] not in _fulltext(engine, budget_notes, "budget", 5)
    found = _fulltext(engine, budget_notes, "Kepler budget", 5)
    assert found[0] == budget_notes["kepler"]  # both terms: ranked first
    assert len(found) == 5


def test_postings_are_exactly_each_projection_rows_lexemes_at_its_revision(
    client: TestClient, engine: Engine, budget_notes: dict[str, Any], make_key: MakeKey
) -> None:
    alice = make_key(tenant=budget_notes["tenant"], user="alice")
    memory = budget_notes["notes"][0]
    patched = client.patch(f"/memories/{memory}", json={"expected_version": 1, "content": "Ledger moved to Vega"},
                           headers=auth(alice))
    assert patched.status_code == 200, patched.text
    with tenant_session(engine, budget_notes["tenant"]) as session:
        mismatched = session.execute(text(
            "SELECT s.memory_id FROM memory_search s WHERE"
            " ARRAY(SELECT unnest(tsvector_to_array(s.tokens)) ORDER BY 1)"
            " IS DISTINCT FROM ARRAY(SELECT l.lexeme FROM memory_lexemes l WHERE l.tenant_id = s.tenant_id"
            "  AND l.memory_id = s.memory_id AND l.revision = s.source_revision AND l.version = s.version ORDER BY 1)"
            " OR EXISTS (SELECT 1 FROM memory_lexemes l WHERE l.tenant_id = s.tenant_id AND l.memory_id = s.memory_id"
            "  AND (l.revision, l.version) <> (s.source_revision, s.version))"
        )).all()
        orphaned = session.execute(text(
            "SELECT count(*) FROM memory_lexemes l WHERE NOT EXISTS"
            " (SELECT 1 FROM memory_search s WHERE s.tenant_id = l.tenant_id AND s.memory_id = l.memory_id)"
        )).scalar_one()
        lexemes = session.execute(text("SELECT lexeme FROM memory_lexemes WHERE memory_id = :id ORDER BY 1"),
                                  {"id": memory}).scalars().all()
    assert mismatched == [] and orphaned == 0
    assert "vega" in lexemes and "budget" not in lexemes
    assert memory not in _fulltext(engine, budget_notes, "budget", 20)
    assert _fulltext(engine, budget_notes, "Vega", 20) == [memory]


def test_postings_are_visible_only_in_their_tenants_transactions(engine: Engine, budget_notes: dict[str, Any]) -> None:
    with tenant_session(engine, budget_notes["tenant"]) as session:
        tenants = session.execute(text("SELECT DISTINCT tenant_id FROM memory_lexemes")).scalars().all()
    assert tenants == [budget_notes["tenant"]]
    with global_session(engine) as session:
        assert session.execute(text("SELECT count(*) FROM memory_lexemes")).scalar_one() == 0
