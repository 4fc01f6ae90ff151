"""Lexical coverage weighted by each term's rarity among the candidates (smoothed IDF)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from memory.recall.scoring import coverage, own_tokens, term_weights


def _memory(content: str) -> Any:
    return SimpleNamespace(key=None, abstract=None, overview=None, content=content)


def test_a_term_every_candidate_shares_weighs_less_than_a_rare_one() -> None:
    pool = [_memory(f"Caroline: message {n}") for n in range(8)] + [_memory("Caroline: the charity race was fun")]
    owns = [own_tokens(m) for m in pool]
    weights = term_weights(["caroline", "charity"], owns)
    assert weights["charity"] > 2 * weights["caroline"]
    rare, common = pool[-1], pool[0]
    assert coverage(["caroline", "charity"], rare, weights) == 1.0
    assert coverage(["caroline", "charity"], common, weights) < coverage(["caroline", "charity"], common) == 0.5


def test_equally_common_terms_give_the_plain_share() -> None:
    pool = [_memory("alpha beta"), _memory("alpha beta gamma")]
    weights = term_weights(["alpha", "beta"], [own_tokens(m) for m in pool])
    assert weights["alpha"] == weights["beta"]
    assert coverage(["alpha", "beta", "delta"], pool[0], {**weights, "delta": weights["alpha"]}) == pytest.approx(2 / 3)
    assert coverage([], pool[0], weights) == 0.0
