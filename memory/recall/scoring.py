"""Scores with a breakdown: every number that decided a rank is shown, none is hidden in a total.

Relevance (lexical coverage, full-text rank, trigram, semantic similarity)
dominates; priors (recency, hotness, authority, confirmation) only separate
comparably relevant memories. ``now`` is an argument, so the same input and the
same instant always give the same scores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from memory.enums import SourceLevel
from memory.models import Memory
from memory.text import tokens

RECENCY_HALF_LIFE_DAYS = 90.0
HOTNESS_HALF_LIFE_DAYS = 7.0
"""Seed 004 §9.1: hotness = sigmoid(log1p(active_count)) × exp(-decay × age_days), half-life 7 days."""
SEMANTIC_FLOOR = 0.75
"""e5 cosine similarities of unrelated short texts sit around 0.7-0.8; below the floor counts as none."""

WEIGHTS = {
    "semantic": 0.50,
    "lexical": 0.25,
    "fulltext": 0.10,
    "trigram": 0.03,
    "recency": 0.04,
    "hotness": 0.03,
    "authority": 0.03,
    "confirmation": 0.02,
}
AUTHORITY = {SourceLevel.E1.value: 1.0, SourceLevel.E2.value: 0.9, SourceLevel.E3.value: 0.8, SourceLevel.E4.value: 0.4}


@dataclass(frozen=True)
class ScoreBreakdown:
    lexical: float
    """Share of the informative query terms the memory contains, weighted by their rarity among the candidates."""
    fulltext: float
    trigram: float
    semantic: float
    """Cosine similarity rescaled above :data:`SEMANTIC_FLOOR` to [0, 1]; 0 without a current vector."""
    cosine: float | None
    recency: float
    hotness: float
    authority: float
    confirmation: float
    relevance: float
    total: float

    def as_dict(self) -> dict[str, float | None]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def own_tokens(memory: Memory) -> set[str]:
    """The memory's own tokens (key, summaries, content)."""
    return set(tokens(" ".join(p for p in (memory.key, memory.abstract, memory.overview, memory.content) if p)))


def term_weights(terms: list[str], pool: Sequence[set[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of each term among the candidates: ``ln(1 + (N + 1) / (df + 1))``.

    A term most candidates share (a name that is in every message of a chat) tells them apart less than a
    rare one; the candidate pool is already in memory, so this costs no query. Equal for every term when
    they are equally common (then coverage is the plain share of terms).
    """
    n = len(pool)
    return {term: math.log(1.0 + (n + 1) / (sum(1 for own in pool if term in own) + 1)) for term in terms}


def coverage(terms: list[str], memory: Memory, weights: Mapping[str, float] | None = None,
             own: set[str] | None = None) -> float:
    """Share of ``terms`` present among the memory's own tokens, each term weighted by ``weights`` (IDF) if given."""
    if not terms:
        return 0.0
    own = own_tokens(memory) if own is None else own
    weight = (lambda term: weights.get(term, 1.0)) if weights else (lambda term: 1.0)
    total = sum(weight(term) for term in terms)
    return sum(weight(term) for term in terms if term in own) / total if total > 0 else 0.0


def _decay(age_days: float, half_life: float) -> float:
    return math.exp(-math.log(2) * max(age_days, 0.0) / half_life)


def hotness(active_count: int, last_used_at: datetime | None, now: datetime) -> float:
    if active_count <= 0 or last_used_at is None:
        return 0.0
    sigmoid = 1.0 / (1.0 + math.exp(-math.log1p(active_count)))
    return sigmoid * _decay((now - last_used_at).total_seconds() / 86_400, HOTNESS_HALF_LIFE_DAYS)


def score(
    memory: Memory,
    *,
    terms: list[str],
    fulltext_rank: float,
    trigram: float,
    cosine: float | None,
    active_count: int,
    last_used_at: datetime | None,
    now: datetime,
    weights: Mapping[str, float] | None = None,
    own: set[str] | None = None,
) -> ScoreBreakdown:
    lexical = coverage(terms, memory, weights, own)
    fulltext = fulltext_rank / (fulltext_rank + 1.0) if fulltext_rank > 0 else 0.0
    semantic = max(0.0, (cosine - SEMANTIC_FLOOR) / (1.0 - SEMANTIC_FLOOR)) if cosine is not None else 0.0
    seen = memory.last_confirmed_at or memory.observed_at or memory.captured_at
    recency = _decay((now - seen).total_seconds() / 86_400, RECENCY_HALF_LIFE_DAYS)
    hot = hotness(active_count, last_used_at, now)
    authority = AUTHORITY.get(memory.source_level, 0.5) * memory.confidence
    confirmation = 1.0 if memory.last_confirmed_at is not None else (0.5 if memory.source_level != "E4" else 0.0)
    parts = {
        "semantic": semantic, "lexical": lexical, "fulltext": fulltext, "trigram": trigram, "recency": recency,
        "hotness": hot, "authority": authority, "confirmation": confirmation,
    }
    relevance = sum(WEIGHTS[k] * parts[k] for k in ("semantic", "lexical", "fulltext", "trigram"))
    total = relevance + sum(WEIGHTS[k] * parts[k] for k in ("recency", "hotness", "authority", "confirmation"))
    return ScoreBreakdown(
        lexical, fulltext, trigram, semantic, cosine, recency, hot, authority, confirmation, relevance, total
    )


@dataclass(frozen=True)
class Scored:
    """A re-read memory with the sources that proposed it and its score breakdown."""

    memory: Memory
    sources: frozenset[str]
    breakdown: ScoreBreakdown

    @property
    def rank_key(self) -> tuple[float, float, float, int, str]:
        from memory.recall.ranking import rank_key

        b = self.breakdown
        return rank_key(b.total, b.relevance, b.authority, self.memory.revision, str(self.memory.memory_id))
