"""Fingerprints find a deleted text's copy inside any longer text (CJK too), not a phrase it merely shares, and
the history walker reaches the payloads of a real Temporal history."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from temporalio.client import WorkflowHistory

from activities.history_scan import copies_in, history_values, serialized
from memory import offload
from memory.deletion.fingerprints import WIDTH, Matcher, _hash, fingerprint, fingerprint_shingles, units
from memory.deletion.index_fingerprints import _posting_windows, lexeme_fingerprints, run_shingles
from memory.deletion.residue import Copy, scan_values
from memory.text import lexemes

SALT = uuid.uuid4().bytes
words = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8), min_size=3, max_size=30)
cjk = st.text(alphabet="我你他住在上海北京喜欢绿茶咖啡跑步周末公司项目报告审批草稿", min_size=3, max_size=60)


def _matcher(*texts: str, kept: tuple[str, ...] = ()) -> Matcher:
    return Matcher(SALT, fingerprint(SALT, texts, kept))


@given(deleted=st.one_of(words.map(" ".join), cjk), before=st.text(max_size=40), after=st.text(max_size=40))
def test_a_copy_inside_any_longer_text_is_found(deleted: str, before: str, after: str) -> None:
    # the copy may be re-spaced, re-cased or NFKC-varied; separators keep the surrounding words apart
    assert _matcher(deleted).copies(f"{before}\n{deleted.upper()}\n{after}")


def test_a_shared_common_phrase_is_not_a_copy_and_kept_words_are_left_out() -> None:
    matcher = _matcher("I live in Reykjavik since last spring", "我住在上海静安区")
    assert not matcher.copies("I live in Paris since last year")
    assert not matcher.copies("我住在广州")
    assert matcher.copies("Note: i LIVE in reykjavik since last spring, she said")
    assert matcher.copies("他说我住在上海静安区附近")
    assert units("\uff32\uff45\uff59\uff4b 我住") == ["reyk", "我", "住"]  # full-width letters, NFKC
    assert fingerprint(SALT, ["I live in Reykjavik"], kept=["I live in Reykjavik."]) == []


@given(deleted=st.lists(st.one_of(words.map(" ".join), cjk), min_size=1, max_size=3),
       kept=st.lists(st.one_of(words.map(" ".join), cjk), max_size=12))
def test_leaving_out_kept_texts_that_share_no_lexeme_changes_no_fingerprint(
    deleted: list[str], kept: list[str]
) -> None:
    """The barrier skips kept texts sharing no lexeme with the deleted ones (they cost it ~2 s of CPU for a
    subject's 2,000 messages); the fingerprints must be exactly those of leaving every kept text out."""
    sequences, every_kept = [lexemes(text) for text in deleted], [lexemes(text) for text in kept]
    runs = fingerprint_shingles(SALT, [run_shingles(s) for s in sequences],
                                {shingle for s in every_kept for shingle in run_shingles(s)})
    windows = _posting_windows(SALT, sequences, every_kept, 10**6)
    assert lexeme_fingerprints(SALT, deleted, kept, 10**6) == (runs, windows)


def test_the_history_walker_reaches_every_payload_of_a_real_history() -> None:
    raw = json.loads((Path(__file__).parent.parent / "tasks" / "histories" / "monthly-report-v1.json").read_text())
    history = WorkflowHistory.from_json("task-history", raw)
    place = Copy("temporal_history", "payloads", "task-history")
    found = {uuid.UUID(int=1): _matcher("Monthly report V1"),  # a payload field's value, re-cased
             uuid.UUID(int=2): _matcher("I live in Reykjavik since last spring")}
    copies = scan_values(place, history_values(history.events), found)
    assert copies == {uuid.UUID(int=1): [place], uuid.UUID(int=2): []}


def test_histories_are_matched_in_the_pool_as_in_place() -> None:
    """The history scan decodes and matches in the CPU pool, never on the worker's event loop: the serialized
    history crosses into a pool process and gives the same answer there."""
    raw = json.loads((Path(__file__).parent.parent / "tasks" / "histories" / "monthly-report-v1.json").read_text())
    fetched = [("task-history", serialized(WorkflowHistory.from_json("task-history", raw)))]
    label = Copy("temporal_history", "payloads", "task-history").label
    found = {uuid.UUID(int=1): _matcher("Monthly report V1"),
             uuid.UUID(int=2): _matcher("I live in Reykjavik since last spring"),
             uuid.UUID(int=3): _matcher("Monthly report V1")}
    pool = offload.CpuPool(1, 0)
    try:
        # One pass for every job of a round; a job's own workflow is not matched for that job.
        assert pool.run(copies_in, fetched, found, {uuid.UUID(int=3): "task-history"}) == {
            uuid.UUID(int=1): [label], uuid.UUID(int=2): [], uuid.UUID(int=3): []}
    finally:
        pool.close()


small_cjk = st.text(alphabet="我住在上海喜欢绿茶", min_size=0, max_size=40)


@given(deleted=st.lists(small_cjk, min_size=1, max_size=4), kept=st.lists(small_cjk, max_size=3),
       values=st.lists(small_cjk, min_size=1, max_size=8))
def test_the_sampled_scan_answers_as_hashing_every_shingle(deleted: list[str], kept: list[str],
                                                          values: list[str]) -> None:
    """Matcher.copies hashes every stride-th shingle and counts runs only near a deleted one (the residue scan's
    cost, issue 23 finding 7); on a small alphabet that makes many partial runs it finds exactly the copies that
    counting along every shingle's hash finds."""
    matcher = Matcher(SALT, fingerprint(SALT, deleted, kept))
    for value in values:
        parts = units(value)
        every = [tuple(parts[i : i + WIDTH]) for i in range(len(parts) - WIDTH + 1)]
        assert matcher.copies(value) == matcher.run([_hash(SALT, shingle) for shingle in every]), (deleted, value)
