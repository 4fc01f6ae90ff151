"""POST /memory-query with real vectors: hybrid candidates, hard-filter invariants, explain, stability, budget."""

from __future__ import annotations

import threading
import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, select, text
from sqlalchemy.orm import Session

from api.settings import Settings
from memory.db import tenant_session
from memory.embedders.engine import MODEL_NAME
from memory.models import MemorySearch
from tests.conftest import MakeKey, auth
from tests.recall.conftest import embed_tenant, ids, recall, write


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _projections(session: Session, tenant: str) -> list[MemorySearch]:
    """The tenant's search projection rows (to read or to age a vector by hand)."""
    return list(session.execute(select(MemorySearch).where(MemorySearch.tenant_id == tenant)).scalars())


def test_a_paraphrase_with_no_shared_word_is_found_by_its_vector(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    target = write(client, key, "The user is allergic to peanuts and must avoid them.")
    write(client, key, "The quarterly sales report is due on the fifth of each month.")
    assert ids(recall(client, key, query="which foods can make me sick?")) == []  # no vectors yet: lexical only
    assert embed_tenant(recall_settings, tenant).written == 2
    bundle = recall(client, key, query="which foods can make me sick?", limit=1)
    assert ids(bundle) == [target]
    components = bundle["items"][0]["score_breakdown"]
    assert components["semantic"] > 0 and components["lexical"] == 0
    assert bundle["items"][0]["matched_by"] == ["vector"]


def test_another_tenants_or_users_identical_memory_never_influences_recall(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant, other_tenant = _tenant(), _tenant()
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    stranger = make_key(tenant=other_tenant, user="alice")
    text = "我的护照号码存放在书房抽屉里 passport drawer"
    mine = write(client, alice, text)
    for other in (bob, stranger):
        for _ in range(3):
            write(client, other, text)
    embed_tenant(recall_settings, tenant)
    embed_tenant(recall_settings, other_tenant)
    bundle = recall(client, alice, query="护照 passport 在哪里", explain=True, limit=10)
    assert ids(bundle) == [mine]
    assert bundle["candidates_considered"] == 1
    assert [c["memory_id"] for c in bundle["explain"]["candidates"]] == [mine]
    assert bundle["explain"]["filtered_by_reason"] == {}


def test_expired_superseded_revoked_and_out_of_purpose_are_never_used_only_counted(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    active = write(client, key, "Project Bluewhale kickoff is in Hangzhou")
    write(client, key, "Project Bluewhale old budget", validity={"expires_at": "2020-01-01T00:00:00Z"})
    write(client, key, "Project Bluewhale billing account", allowed_purposes=["billing"])
    corrected = write(client, key, "Project Bluewhale lead is Wang")
    patched = client.patch(f"/memories/{corrected}",
                           json={"expected_version": 1, "content": "Project Bluewhale lead is Li"}, headers=auth(key))
    assert patched.status_code == 200
    expired = write(client, key, "Project Bluewhale vendor list")
    assert client.post(f"/memories/{expired}/expire", headers=auth(key)).status_code == 200
    embed_tenant(recall_settings, tenant)
    bundle = recall(client, key, query="Project Bluewhale", explain=True, limit=10, min_relevance=0)
    contents = {item["content"] for item in bundle["items"]}
    assert "Project Bluewhale lead is Li" in contents and "Project Bluewhale kickoff is in Hangzhou" in contents
    assert not contents & {
        "Project Bluewhale old budget", "Project Bluewhale billing account", "Project Bluewhale lead is Wang"
    }
    filtered = bundle["explain"]["filtered_by_reason"]
    assert filtered == {"expired": 2, "purpose_not_allowed": 1, "superseded": 1}
    for hidden in ("Wang", "old budget", "billing account", "vendor list"):
        assert hidden not in str(bundle)
    billing = recall(client, key, query="Project Bluewhale", purpose="billing", limit=10, min_relevance=0)
    assert "Project Bluewhale billing account" in {i["content"] for i in billing["items"]}
    assert active in ids(billing)


def test_scores_are_explained_and_the_order_is_stable(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    source = {"source_type": "EXPLICIT_USER_STATEMENT", "captured_at": "2026-06-01T09:00:00Z"}
    for n in range(6):  # identical text and time from six sources: only the tie-breakers decide
        write(client, key, "季度复盘会议纪要 quarterly review notes", source={**source, "source_id": f"conv-{n}"})
    write(client, key, "季度复盘会议纪要 quarterly review notes", source={**source, "source_id": "conv-0"})
    embed_tenant(recall_settings, tenant)
    orders = {tuple(ids(recall(client, key, query="复盘会议 review", limit=10))) for _ in range(3)}
    assert len(orders) == 1
    order = next(iter(orders))
    assert len(order) == 6
    bundle = recall(client, key, query="复盘会议 review", limit=10, explain=True)
    assert [d["reason"] for d in bundle["conflict_decisions"]] == ["DUPLICATE_OF_SOURCE"]  # the 7th: same source
    parts = bundle["explain"]["candidates"][0]["breakdown"]
    assert set(parts) >= {"lexical", "semantic", "recency", "hotness", "authority", "confirmation", "total"}


def test_chinese_english_and_mixed_queries_find_their_memories(
    client: TestClient, make_key: MakeKey, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    zh = write(client, key, "用户每月五号需要提交销售报告给财务部门")
    en = write(client, key, "The user prefers hiking in the mountains on weekends")
    mixed = write(client, key, "Prefers reports in Markdown with 图表 embedded")
    embed_tenant(recall_settings, tenant)
    assert ids(recall(client, key, query="销售报告什么时候交", limit=1)) == [zh]
    assert ids(recall(client, key, query="weekend hiking", limit=1)) == [en]
    assert ids(recall(client, key, query="Markdown图表", limit=1)) == [mixed]


def test_budget_truncation_is_flagged_and_an_empty_bundle_is_valid(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    for n in range(4):
        write(client, key, f"会议记录 {n} " + "细节内容很长。" * 40)
    tight = recall(client, key, query="会议记录", token_budget=400, limit=5)
    assert tight["truncated_by_budget"] is True
    assert 1 <= len(tight["items"]) < 4
    roomy = recall(client, key, query="会议记录", token_budget=5000, limit=5)
    assert roomy["truncated_by_budget"] is False and len(roomy["items"]) == 4
    empty = recall(client, key, query="完全无关的问题 zebra")
    assert empty["items"] == [] and empty["knowledge"] == [] and empty["conflicts"] == []
    rendered = client.post("/recall/render", json={"query": "完全无关的问题 zebra"}, headers=auth(key)).json()
    assert rendered["text"] == ""


def test_a_correction_clears_the_vector_and_a_stale_vector_is_refused(
    client: TestClient, make_key: MakeKey, engine: Engine, recall_worker: None, recall_settings: Settings
) -> None:
    from memory.embedders.engine import default_embedder
    from memory.store.vectors import pending_batch, store_vectors

    tenant = _tenant()
    key = make_key(tenant=tenant)
    memory_id = write(client, key, "The office wifi password rotates every Monday")
    with tenant_session(engine, tenant) as session:
        pending = pending_batch(session, tenant, MODEL_NAME, 10)
    assert [str(p.memory_id) for p in pending] == [memory_id]
    vectors = default_embedder().embed([p.text for p in pending])
    assert client.patch(f"/memories/{memory_id}", json={"expected_version": 1, "content": "It rotates on Fridays"},
                        headers=auth(key)).status_code == 200
    with tenant_session(engine, tenant) as session:
        assert store_vectors(session, tenant, MODEL_NAME, list(zip(pending, vectors, strict=True))) == (0, 1)
    embed_tenant(recall_settings, tenant)
    with tenant_session(engine, tenant) as session:
        [row] = _projections(session, tenant)
        assert row.version == 2 and row.embedding_model == MODEL_NAME and row.embedding_revision is not None
        row.embedding_model = "some-older-model"  # the model changed: every vector is now stale
    result = embed_tenant(recall_settings, tenant)
    assert result.written == 1
    with tenant_session(engine, tenant) as session:
        assert [row.embedding_model for row in _projections(session, tenant)] == [MODEL_NAME]


def test_the_backlog_holds_new_rows_first_then_vectors_of_any_other_model(
    client: TestClient, make_key: MakeKey, engine: Engine, recall_worker: None, recall_settings: Settings
) -> None:
    from memory.store.vectors import pending_batch

    tenant = _tenant()
    key = make_key(tenant=tenant)
    written = [write(client, key, f"Backlog fact number {n} about otters") for n in range(4)]
    embed_tenant(recall_settings, tenant)
    below, above, current = written[0], written[1], written[2]  # written[3] gets no vector at all
    with tenant_session(engine, tenant) as session:
        rows = {str(r.memory_id): r for r in _projections(session, tenant)}
        rows[below].embedding_model = "aaa-an-older-model"  # sorts before the current name
        rows[above].embedding_model = "zzz-an-older-model"  # sorts after it
        rows[written[3]].embedding = None
        rows[written[3]].embedding_model = None
    with tenant_session(engine, tenant) as session:
        pending = [str(p.memory_id) for p in pending_batch(session, tenant, MODEL_NAME, 10)]
        first_two = [str(p.memory_id) for p in pending_batch(session, tenant, MODEL_NAME, 2)]
    assert pending == [written[3], below, above] and current not in pending
    assert first_two == [written[3], below]


def test_an_empty_backlog_is_found_by_index_not_by_reading_every_row(engine: Engine) -> None:
    """The planner's choice is judged on a table whose contents the test controls: a session-local shadow of
    ``memory_search`` (same columns and indexes; unqualified names find the temporary schema first) holding a
    tenant in the steady state, every row embedded by the current model. Judged on the shared test database
    instead, an empty tenant costs every index the same and the tie went either way (a red CI run)."""
    from memory.store.vectors import pending_batch

    tenant = _tenant()
    sent: list[tuple[str, object]] = []
    me = threading.get_ident()

    def capture(conn: object, cursor: object, statement: str, parameters: object, context: object, many: bool) -> None:
        if threading.get_ident() == me:  # the recall worker's threads share this engine (the embedding sweep)
            sent.append((statement, parameters))

    with tenant_session(engine, tenant) as session:
        raw = session.connection().connection.driver_connection
        assert raw is not None  # a live pooled connection always has its psycopg connection
        raw.execute("CREATE TEMP TABLE memory_search (LIKE public.memory_search INCLUDING ALL) ON COMMIT DROP")
        raw.execute(
            "INSERT INTO memory_search (tenant_id, memory_id, version, search_text, tokens, embedding, "
            "embedding_model, source_revision) SELECT %s, gen_random_uuid(), 1, 'steady state', ''::tsvector, "
            "array_fill(0.05, ARRAY[384])::vector, %s, 1 "
            "FROM generate_series(1, 5000)",
            (tenant, MODEL_NAME),
        )
        raw.execute("ANALYZE memory_search")
        shadows: dict[str, str] = dict(raw.execute(
            "SELECT indexdef, indexname FROM pg_indexes WHERE tablename = 'memory_search' "
            "AND schemaname = (SELECT nspname FROM pg_namespace WHERE oid = pg_my_temp_schema())"
        ).fetchall())
        event.listen(engine, "before_cursor_execute", capture)
        try:
            assert pending_batch(session, tenant, MODEL_NAME, 5) == []
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        probes = [(sql, params) for sql, params in sent if "FROM memories" in sql]
        assert len(probes) == 3  # no vector; a model sorting before the current one; after it
        session.execute(text("SET LOCAL enable_seqscan = off"))  # the tombstone and memory tables are tiny
        plans = ["\n".join(row[0] for row in raw.execute("EXPLAIN " + sql, params).fetchall())
                 for sql, params in probes]

    def shadow_of(predicate: str) -> str:
        [name] = [name for definition, name in shadows.items() if definition.endswith(f"WHERE ({predicate})")]
        return name

    unembedded, by_model = shadow_of("embedding IS NULL"), shadow_of("embedding IS NOT NULL")
    assert f"using {unembedded} on memory_search" in plans[0], plans[0]
    assert all(f"using {by_model} on memory_search" in plan for plan in plans[1:]), plans[1:]
    assert all("Seq Scan on memory_search" not in plan for plan in plans), plans


def test_a_vector_without_direction_gives_no_cosine_rather_than_a_broken_bundle(
    client: TestClient, make_key: MakeKey, engine: Engine, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    memory_id = write(client, key, "The garage door code is written on the calendar")
    embed_tenant(recall_settings, tenant)
    with tenant_session(engine, tenant) as session:  # a zero vector: pgvector's cosine with it is NaN
        [row] = _projections(session, tenant)
        assert row.embedding is not None  # embed_tenant gave it a vector
        row.embedding = [0.0] * len(row.embedding)
    bundle = recall(client, key, query="garage door code", explain=True)
    [item] = bundle["items"]
    assert item["memory_id"] == memory_id and item["score_breakdown"]["cosine"] is None


def test_a_lexical_candidates_cosine_comes_only_from_a_vector_of_its_current_revision_and_model(
    client: TestClient, make_key: MakeKey, engine: Engine, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    memory_id = write(client, key, "The spare bike lock key is taped under the workbench")
    embed_tenant(recall_settings, tenant)

    def cosine() -> float | None:
        [item] = recall(client, key, query="bike lock key")["items"]
        assert item["memory_id"] == memory_id and "fulltext" in item["matched_by"]
        return item["score_breakdown"]["cosine"]  # type: ignore[no-any-return]

    assert cosine() is not None
    with tenant_session(engine, tenant) as session:  # computed from an earlier revision
        [row] = _projections(session, tenant)
        assert row.embedding_revision is not None  # embed_tenant stamped the vector's revision
        row.embedding_revision -= 1
    assert cosine() is None
    with tenant_session(engine, tenant) as session:  # from the current revision, by another model
        [row] = _projections(session, tenant)
        row.embedding_revision, row.embedding_model = row.source_revision, "some-older-model"
    assert cosine() is None
    with tenant_session(engine, tenant) as session:
        [row] = _projections(session, tenant)
        row.embedding_model = MODEL_NAME
    assert cosine() is not None
