"""A record's search coverage (the share of the query's lexemes its readable fields hold) and rank, checked against
an independent computation: each field's lexemes read back from PostgreSQL and intersected in Python.

The source joins a hit's lexemes with the query's in SQL (issue 23, finding 7: the earlier formulation cost 1.6 s
of PostgreSQL's CPU per long CJK query); whatever the formulation, its coverage must be this set arithmetic."""

from __future__ import annotations

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from memory.db import tenant_session
from memory.resources.search import MAX_QUERY_TERMS, parse_query, snippet_pattern
from tests.conftest import MakeKey
from tests.resources.reader_support import agent_access, new_key, put, reader, tenant

WORDS = ["budget", "review", "design", "push", "上海", "周报", "预算", "出差", "提醒", "配置", "合同", "付款"]
field_text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=5).map(" ".join)
records = st.lists(st.tuples(field_text.filter(str.strip), field_text), min_size=1, max_size=6)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


def _lexemes(engine: Engine, tenant_id: str, fields: tuple[str, ...]) -> dict[str, set[str]]:
    """Each record's lexemes over ``fields``, read back from its search rows (no join with a query)."""
    by_record: dict[str, set[str]] = {}
    with tenant_session(engine, tenant_id) as session:
        rows = session.execute(text(
            "SELECT record_id, tsvector_to_array(tokens) FROM resource_search "
            "WHERE tenant_id = :t AND resource = 'todo' AND field_path = ANY(:fields)"),
            {"t": tenant_id, "fields": list(fields)})
        for record_id, lexemes in rows:
            by_record.setdefault(record_id, set()).update(lexemes)
    return by_record


def _query_lexemes(engine: Engine, tenant_id: str, terms: tuple[str, ...]) -> set[str]:
    with tenant_session(engine, tenant_id) as session:
        return set(session.execute(text("SELECT tsvector_to_array(to_tsvector('simple', :q))"),
                                   {"q": " ".join(terms)}).scalar_one())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=records, query=queries, notes_readable=st.booleans())
@example(rows=[("budget 上海", "budget"), ("review", "")], query="budget review 上海", notes_readable=True)
def test_coverage_is_the_share_of_query_lexemes_in_readable_fields(
    client: TestClient, make_key: MakeKey, engine: Engine, rows: list[tuple[str, str]], query: str,
    notes_readable: bool,
) -> None:
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    for n, (title, notes) in enumerate(rows):
        put(client, key, f"todo:r{n}", {"title": title, "status": "open", **({"notes": notes} if notes else {})})
    fields = ("/title", "/status", "/notes") if notes_readable else ("/title", "/status")
    access = agent_access(tenant_id, "alice", "agent", {"todo": fields})
    parsed = parse_query(query)
    the_reader = reader(client)
    with tenant_session(engine, tenant_id) as session:
        candidates = the_reader.sources.get("todo").match(session, access, access.grants["todo"], parsed, 50)

    wanted = _query_lexemes(engine, tenant_id, parsed.terms)
    expected = {record_id: len(lexemes & wanted) / len(wanted)
                for record_id, lexemes in _lexemes(engine, tenant_id, fields).items() if lexemes & wanted}
    assert {c.record_id: round(c.coverage, 9) for c in candidates} == {
        record_id: round(share, 9) for record_id, share in expected.items()}
    # Most of the query first, then rank, then id: the order the ranker starts from.
    assert [c.record_id for c in candidates] == sorted(
        (c.record_id for c in candidates), key=lambda r: (-expected[r], -next(c.rank for c in candidates
                                                                            if c.record_id == r), r))


def test_a_snippet_looks_for_the_words_the_query_was_matched_by_only() -> None:
    """A long query is matched by its first MAX_QUERY_TERMS terms; its snippet pattern (made once per search) holds
    the words those came from, never the ignored rest, and finds them in any case."""
    words = [f"word{n:02d}" for n in range(MAX_QUERY_TERMS + 8)]
    text = " ".join(words)
    pattern = snippet_pattern(text, parse_query(text).terms)
    assert pattern is not None
    assert pattern.search("a WORD00 here") and pattern.search(f"x {words[MAX_QUERY_TERMS - 1]}")
    assert not pattern.search(f"x {words[MAX_QUERY_TERMS]} y")  # past the cap: the search never matched it
    cjk = "预算上海出差" * 3
    assert snippet_pattern(cjk, parse_query(cjk).terms).search("我们的出差计划")  # type: ignore[union-attr]
