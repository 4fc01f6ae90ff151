"""Scoring: pool BM25 over lexemes, the z-fusion with the cosine, pseudo-relevance feedback, stability."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime

import pytest

from memory.models import Memory
from memory.recall.ranking import stable_rank
from memory.recall.scoring import (
    FEEDBACK_MIN_POOL,
    Evidence,
    coverage,
    own_tokens,
    score_pool,
    term_weights,
    z_scores,
)
from memory.text import search_terms

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def _memory(content: str, n: int = 0) -> Memory:
    return Memory(
        memory_id=uuid.UUID(int=n + 1), key=None, abstract=None, overview=None, content=content, revision=n + 1,
        last_confirmed_at=None, observed_at=None, captured_at=NOW, source_level="E2", confidence=1.0,
    )


def _rank(pool: list[Evidence], query: str) -> list[str]:
    return [s.memory.content for s in stable_rank(score_pool(pool, search_terms(query), NOW))]


def test_a_term_every_candidate_shares_weighs_less_than_a_rare_one() -> None:
    pool = [_memory(f"Caroline: message {n}") for n in range(8)] + [_memory("Caroline: the charity race was fun")]
    owns = [own_tokens(m) for m in pool]
    terms = search_terms("Caroline charity")
    weights = term_weights(terms, owns)
    assert weights[terms[1]] > 2 * weights[terms[0]]
    rare, common = pool[-1], pool[0]
    assert coverage(terms, rare, weights) == 1.0
    assert coverage(terms, common, weights) < coverage(terms, common) == 0.5


def test_stems_match_other_inflections() -> None:
    assert search_terms("paintings") == search_terms("painted") == ["paint"]
    assert "paint" in own_tokens(_memory("She paints every Sunday"))


def test_bm25_prefers_the_rare_term_and_saturates_repetition() -> None:
    pool = [Evidence(_memory(f"Melanie talked about her day {n}", n), frozenset({"fulltext"})) for n in range(6)]
    pool.append(Evidence(_memory("Melanie went to a pottery class", 6), frozenset({"fulltext"})))
    pool.append(Evidence(_memory("Melanie Melanie Melanie Melanie", 7), frozenset({"fulltext"})))
    ranked = _rank(pool, "Melanie pottery")
    assert ranked[0] == "Melanie went to a pottery class"
    scores = {s.memory.content: s.breakdown for s in score_pool(pool, search_terms("Melanie pottery"), NOW)}
    once = scores["Melanie talked about her day 0"].lexical
    four_times = scores["Melanie Melanie Melanie Melanie"].lexical
    assert once < four_times < 4 * once  # term frequency saturates (k1)


def test_z_scores_without_variance_are_zero() -> None:
    assert z_scores([0.3, 0.3, 0.3]) == [0.0, 0.0, 0.0]
    assert z_scores([1.0, 3.0]) == [-1.0, 1.0]


def _feedback_pool() -> list[Evidence]:
    pool = [Evidence(_memory("Caroline went to the LGBTQ support group meeting", 0), frozenset({"fulltext"}))]
    pool.append(Evidence(_memory("The support group meeting was so powerful for Caroline", 1), frozenset({"fulltext"})))
    pool.append(Evidence(_memory("Caroline said the support group was welcoming", 2), frozenset({"fulltext"})))
    # Shares no query word, only the top hits' telling ones ("lgbtq", "group", "meet"):
    pool.append(Evidence(_memory("The LGBTQ group meeting made her feel at home", 3), frozenset({"vector"})))
    pool += [Evidence(_memory(f"Unrelated chatter number {n} about the weather", 10 + n), frozenset({"vector"}))
             for n in range(FEEDBACK_MIN_POOL)]
    return pool


def test_feedback_lifts_a_memory_that_shares_the_best_hits_words_not_the_querys() -> None:
    pool = _feedback_pool()
    scores = {s.memory.content: s.breakdown for s in score_pool(pool, search_terms("Caroline support"), NOW)}
    neighbour = scores["The LGBTQ group meeting made her feel at home"]
    assert neighbour.lexical == 0 and neighbour.expansion > 0
    assert neighbour.total > max(b.total for c, b in scores.items() if c.startswith("Unrelated"))
    small = score_pool(pool[:FEEDBACK_MIN_POOL - 1], search_terms("Caroline support"), NOW)
    assert all(s.breakdown.expansion == 0 for s in small)


def test_the_same_pool_in_any_order_ranks_the_same() -> None:
    pool = _feedback_pool()
    expected = _rank(pool, "Caroline support group")
    for seed in range(3):
        shuffled = pool[:]
        random.Random(seed).shuffle(shuffled)
        assert _rank(shuffled, "Caroline support group") == expected


def test_an_empty_pool_scores_nothing() -> None:
    assert score_pool([], ["x"], NOW) == []


@pytest.mark.parametrize("cosines", [[None, None], [0.9, None]])
def test_a_candidate_without_a_vector_gets_the_pools_lowest_cosine(cosines: list[float | None]) -> None:
    pool = [Evidence(_memory(f"memory {n}", n), frozenset({"fulltext"}), cosine=c) for n, c in enumerate(cosines)]
    scored = score_pool(pool, ["memori"], NOW)
    assert [s.breakdown.cosine for s in scored] == cosines
    assert all(s.breakdown.fused == 0.0 for s in scored)  # equal BM25, and the missing cosine equals the lowest
