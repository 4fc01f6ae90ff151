"""A window reads only as far back as its budget needs (issue 23, finding 7).

Before, every window read the session's newest 2,000 messages whatever its budget: eight parallel windows
over a 2,000-message CJK session took 12.5 s each and another tenant's p95 to seconds. The HTTP test counts
the ``memory_events`` rows a window's statements return; the property checks the paging on any session.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from api.main import create_app
from api.settings import Settings
from memory.sessions.messages import MessageRole, StageMessage
from memory.sessions.recent import LOOKBACK_FACTOR, OFFLOAD_FROM_TOKENS, tail_for_budget
from memory.sessions.window import rendered_tokens
from tests.conftest import MakeKey, auth
from tests.sessions.conftest import say

MESSAGES = 600


@pytest.fixture(scope="module")
def quiet_api(settings: Settings) -> Iterator[TestClient]:
    """An API whose sessions never commit by themselves: the messages stay as posted."""
    quiet = settings.model_copy(update={"session_commit_after_messages": 0, "session_commit_after_tokens": 0})
    with TestClient(create_app(quiet)) as client:
        yield client


def _rows_read(client: TestClient) -> tuple[list[int], Any]:
    """A counter of the rows each ``memory_events`` SELECT of the app returns, and its listener."""
    counts: list[int] = []

    def count(_conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM memory_events" in statement:
            counts.append(cursor.rowcount)

    event.listen(client.app.state.engine, "after_cursor_execute", count)  # type: ignore[attr-defined]
    return counts, count


def test_a_window_over_a_long_session_reads_only_the_pages_its_budget_needs(
    quiet_api: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    assert quiet_api.post("/sessions", json={"session_id": session_id}, headers=auth(key)).status_code == 201
    for start in range(0, MESSAGES, 300):
        batch = [say(f"m{n}", "user" if n % 2 else "assistant", f"第{n}条：我们讨论了上海项目的预算和排期")
                 for n in range(start, start + 300)]
        posted = quiet_api.post(f"/sessions/{session_id}/messages", json={"messages": batch}, headers=auth(key))
        assert posted.status_code == 201, posted.text
    counts, listener = _rows_read(quiet_api)
    try:
        small = quiet_api.get(f"/sessions/{session_id}/window?budget_tokens=100", headers=auth(key))
        assert small.status_code == 200, small.text
        assert 0 < sum(counts) <= 100, counts  # one page of 100 of the 600, not the whole session
        assert small.json()["messages"][-1]["sequence_no"] == MESSAGES and small.json()["tokens"] <= 100
        whole = quiet_api.get(f"/sessions/{session_id}/window?budget_tokens=1000000", headers=auth(key))
        assert [m["sequence_no"] for m in whole.json()["messages"]] == list(range(1, MESSAGES + 1))
        total = whole.json()["tokens"]
        assert total < OFFLOAD_FROM_TOKENS  # a window of just this budget is made in this process: its reads count
        counts.clear()
        exact = quiet_api.get(f"/sessions/{session_id}/window?budget_tokens={total}", headers=auth(key))
        assert sum(counts) == MESSAGES  # a budget that needs every message reads every one, once
        assert [m["sequence_no"] for m in exact.json()["messages"]] == list(range(1, MESSAGES + 1))
    finally:
        event.remove(quiet_api.app.state.engine, "after_cursor_execute", listener)  # type: ignore[attr-defined]


def _session(sizes: Sequence[int], deleted: set[int]) -> list[StageMessage]:
    at = datetime(2026, 7, 1, tzinfo=UTC)
    return [StageMessage(f"e{n}", n, MessageRole.USER, "词 " * size, at)
            for n, size in enumerate(sizes, start=1) if n not in deleted]


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 60), max_size=300),
    deleted=st.sets(st.integers(1, 300), max_size=40),
    budget=st.integers(1, 3_000),
    page=st.integers(1, 120),
    lookback=st.integers(1, 400),
)
def test_the_tail_is_the_newest_messages_and_stops_one_page_past_what_the_budget_needs(
    sizes: list[int], deleted: set[int], budget: int, page: int, lookback: int
) -> None:
    live = _session(sizes, deleted)
    reads: list[tuple[int, int]] = []

    def read(first: int, last: int) -> list[StageMessage]:
        reads.append((first, last))
        return [m for m in live if first <= m.sequence_no <= last]

    last = len(sizes)
    tail = tail_for_budget(read, last, budget, page=page, lookback=lookback)
    floor = max(1, last - lookback + 1)
    within = [m for m in live if m.sequence_no >= floor]
    assert list(tail) == within[len(within) - len(tail):]  # the newest live messages, in order, none skipped
    assert all(hi - lo < page for lo, hi in reads) and len(reads) <= math.ceil(lookback / page)
    need = LOOKBACK_FACTOR * budget
    cost = sum(rendered_tokens(m) for m in tail)
    assert cost >= need or not reads or reads[-1][0] == floor  # it stops only once the budget is covered
    if reads:  # ... and its oldest page was needed: without it the budget was not yet covered
        assert sum(rendered_tokens(m) for m in tail if m.sequence_no > reads[-1][1]) < need
