"""The residue scan sees copies held in search indexes (issue 23, re-probe breach B).

An index holds no text: a ``tsvector`` holds lexemes and positions, ``memory_lexemes`` one lexeme per row, and
Chinese as overlapping character pairs, so the text's fingerprints never matched them. Index rows carrying a
deleted text's lexemes, left behind as a purge bug would leave them, are found by (table, column, row id) and
keep the job short of completed; ordinary kept text is not reported.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, text, update
from sqlalchemy.orm import Session

from api.settings import Settings
from memory.db import tenant_session
from memory.deletion.fingerprints import WIDTH, salt_of
from memory.deletion.index_fingerprints import IndexMatcher, lexeme_runs, posting_windows
from memory.deletion.residue import Copy, scan
from memory.models import MemoryLexeme, MemorySearch
from memory.resources.models import ResourceSearch
from memory.text import STOP_LEXEMES, lexemes
from tests.conftest import MakeKey, auth
from tests.deletion.test_lineage import forget
from tests.factories import candidate
from tests.sessions.conftest import post, say
from tests.workers import api_with_worker

DELETED = ["我的医生说我从二零一九年起就有糖尿病",
           "My cardiologist wrote that the stent in my left artery is narrowing"]


@pytest.fixture(scope="module")
def index_api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "index-residue") as client:
        yield client


def _kept_rows(client: TestClient, key: str) -> tuple[uuid.UUID, str]:
    """A memory and a record about something else: their index rows are where the plants go."""
    memory = client.post("/memory-candidates", json=candidate("Alice waters the ferns on Sundays"), headers=auth(key))
    assert memory.status_code in (200, 201), memory.text
    record = client.put("/records/todo/t-kept", json={"data": {"title": "Buy ferns", "status": "open"}},
                        headers=auth(key))
    assert record.status_code in (200, 201), record.text
    return uuid.UUID(memory.json()["memory_id"]), "alice/todo/t-kept//title"  # owner/resource/record/field path


def _plant(session: Session, tenant: str, memory_id: uuid.UUID, orphan: uuid.UUID) -> None:
    """The deleted texts' lexemes, as the projection writes them, under rows the deletion does not cover: the
    kept memory's and record's tsvectors (their text untouched), and postings naming a memory that is gone."""
    joined = " ".join(lexemes(DELETED[0]))
    tokens = text("to_tsvector('simple', :joined)").bindparams(joined=joined)
    session.execute(update(MemorySearch).where(MemorySearch.tenant_id == tenant, MemorySearch.memory_id == memory_id)
                    .values(tokens=tokens))
    english = text("strip(to_tsvector('simple', :joined))").bindparams(joined=" ".join(lexemes(DELETED[1])))
    session.execute(update(ResourceSearch).where(ResourceSearch.tenant_id == tenant, ResourceSearch.resource == "todo")
                    .values(tokens=english))
    postings = list(dict.fromkeys(lexemes(DELETED[1])))
    random.shuffle(postings)
    session.add_all(MemoryLexeme(tenant_id=tenant, audience="tenant", lexeme=lexeme, revision=n, memory_id=orphan,
                                 version=1) for n, lexeme in enumerate(postings))


def _expected(memory_id: uuid.UUID, record_row: str, orphan: uuid.UUID) -> set[str]:
    return {f"memory_search.tokens#{memory_id}", f"resource_search.tokens#{record_row}",
            f"memory_lexemes.lexeme#{orphan}"}


def test_index_rows_left_after_a_completed_deletion_are_found_by_table_column_and_row(
    index_api: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    post(index_api, key, "s-gone", *(say(f"m{n}", "user", t) for n, t in enumerate(DELETED)))
    memory_id, record_row = _kept_rows(index_api, key)
    job = forget(index_api, key, {"type": "session", "session_id": "s-gone"})
    assert (job["status"], job["fully_deleted"], job["remaining_copies"]) == ("completed", True, []), job
    job_id, orphan = uuid.UUID(job["job_id"]), uuid.uuid4()

    with tenant_session(engine, tenant) as session:
        _plant(session, tenant, memory_id, orphan)
    with tenant_session(engine, tenant) as session:
        copies = scan(session, tenant, settings.artifact_root(engine), {job_id: "alice"})[job_id]
        found = {copy.label for copy in copies}
    assert found == _expected(memory_id, record_row, orphan), found


def test_index_rows_the_purge_does_not_know_keep_the_job_short_of_completed(
    index_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    post(index_api, key, "s-gone", *(say(f"m{n}", "user", t) for n, t in enumerate(DELETED)))
    memory_id, record_row = _kept_rows(index_api, key)
    orphan = uuid.uuid4()
    with tenant_session(engine, tenant) as session:
        _plant(session, tenant, memory_id, orphan)

    job: dict[str, Any] = forget(index_api, key, {"type": "session", "session_id": "s-gone"})

    assert job["status"] == "failed_requires_action" and job["fully_deleted"] is False, job
    listed = {c for c in job["remaining_copies"] if "#" in c}
    assert listed == _expected(memory_id, record_row, orphan), listed
    assert all(t not in str(job) for t in DELETED)


SALT = salt_of(uuid.uuid4())
words = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=4, max_size=9), min_size=6, max_size=25)
cjk = st.text(alphabet="我你他住在上海北京喜欢绿茶咖啡跑步周末公司项目报告审批草稿", min_size=7, max_size=50)
filler = st.lists(st.sampled_from(["ferns", "water", "sunday", "garden", "蕨类", "浇水", "周日"]), max_size=12)


def _matcher(deleted: str, kept: str | None = None) -> IndexMatcher:
    keep = [kept] if kept else []
    return IndexMatcher(SALT, lexeme_runs(SALT, [deleted], keep), posting_windows(SALT, [deleted], keep, 10**6))


def _tsvector(engine: Engine, value: str, strip: bool = False) -> str:
    with engine.connect() as connection:
        vector = "strip(to_tsvector('simple', :v))" if strip else "to_tsvector('simple', :v)"
        return str(connection.execute(text(f"SELECT {vector}::text"), {"v": " ".join(lexemes(value))}).scalar_one())


@given(deleted=st.one_of(words.map(" ".join), cjk), before=filler.map(" ".join), after=filler.map(" ".join))
def test_any_deleted_text_inside_an_index_row_is_found_and_a_kept_one_is_not(
    engine: Engine, deleted: str, before: str, after: str
) -> None:
    """Whatever the text, the index row PostgreSQL builds of a longer text holding it is a copy (in position order;
    without positions or as one row's postings, when it has WIDTH distinct content lexemes: fewer are chance);
    the same text kept by the deletion is no copy."""
    matcher = _matcher(deleted)
    host = f"{before}\n{deleted.upper()}\n{after}"
    assert matcher.tsvector_copies(_tsvector(engine, host))
    if len(set(lexemes(deleted)) - STOP_LEXEMES) >= WIDTH:
        assert matcher.tsvector_copies(_tsvector(engine, host, strip=True))
        assert matcher.holds_all_of_a_window(lexemes(host))
    kept = _matcher(deleted, kept=deleted)
    assert kept.empty and not kept.tsvector_copies(_tsvector(engine, host))
    assert not matcher.holds_all_of_a_window(lexemes(f"{before} {after}"))


def test_words_a_deleted_text_shares_with_ordinary_text_are_no_copy() -> None:
    deleted = "I live in Reykjavik since last spring with my two cats"
    matcher = _matcher(deleted)
    assert not matcher.holds_all_of_a_window(lexemes("I live in Paris since last year, no cats"))
    assert not matcher.tsvector_copies("'i':1 'live':2 'in':3 'pari':4 'sinc':5 'last':6 'year':7")
    assert matcher.holds_all_of_a_window(lexemes("spring, last: Reykjavik since living"))
    assert Copy("memory_lexemes", "lexeme", "x").label == "memory_lexemes.lexeme#x"
