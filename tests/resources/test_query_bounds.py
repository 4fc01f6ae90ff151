"""A long query costs a bounded search (issue 23, finding 7).

A 1,000-character CJK query to ``POST /resources/search`` is ~850 distinct bigrams; every one went into the
OR of the full-text match and the lexeme join of every type's source, and the statement ran into the 15 s
timeout (a 503). The query is now matched by its first :data:`MAX_QUERY_TERMS` terms: the HTTP test reads the
terms every search statement was given, the property holds for any text a caller may send.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from memory import offload
from memory.resources.search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, parse_query
from memory.text import search_terms
from tests.conftest import MakeKey
from tests.resources.reader_support import new_key, put, search
from tests.test_offload import in_place

CJK = "我们今天讨论项目计划预算会议上海北京客户需求设计测试发布时间安排问题解决方案数据分析报告"


def test_a_thousand_character_cjk_query_is_matched_by_a_bounded_number_of_terms(
    client: TestClient, make_key: MakeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In place, so that this engine sees the statements (a long query runs in the CPU pool: the same search()).
    monkeypatch.setattr(offload, "in_tenant", in_place)
    key = new_key(make_key)
    put(client, key, "todo:plan", {"title": "上海项目预算会议", "status": "open"})
    rng = random.Random(7)
    query = "上海项目" + "".join(rng.choice(CJK) for _ in range(MAX_QUERY_CHARS - 4))
    seen: list[int] = []

    def terms_of(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if isinstance(parameters, dict) and "tsquery" in parameters:
            seen.append(len(str(parameters["tsquery"]).split(" | ")))

    engine = client.app.state.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", terms_of)
    try:
        found = search(client, key, query=query)
    finally:
        event.remove(engine, "before_cursor_execute", terms_of)
    assert len(search_terms(query)) > 10 * MAX_QUERY_TERMS  # what every statement was given before
    assert seen and max(seen) <= MAX_QUERY_TERMS, seen
    assert [hit["ref"] for hit in found["items"]] == ["todo:plan"]  # its first words still find the record


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=MAX_QUERY_CHARS))
def test_any_query_is_its_first_terms_never_more_than_the_cap(text: str) -> None:
    try:
        query = parse_query(text)
    except Exception as exc:  # a query without a word is the caller's typed error
        assert getattr(exc, "code", None) == "invalid_query", exc
        return
    assert 1 <= len(query.terms) <= MAX_QUERY_TERMS
    assert list(query.terms) == search_terms(text)[:MAX_QUERY_TERMS]
