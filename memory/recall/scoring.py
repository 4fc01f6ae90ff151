"""Scores with a breakdown: every number that decided a rank is shown, none is hidden in a total.

Ranking fuses the two relevance signals on one scale: BM25 of the query's lexemes
(statistics from the candidate pool) and the cosine of the query and memory
vectors, each as a z-score within the pool, 0.55 / 0.45. One round of
pseudo-relevance feedback then adds the most telling lexemes of the three best
candidates to the BM25 side (weight 0.3): a question's answer often shares words
with the turns around it, not with the question. In BM25 a word of a message a
reply quotes counts 0.4 of the reply's own (:func:`lexical_bag`). Priors (recency,
hotness, authority, confirmation) only separate comparably relevant memories.

On LoCoMo (bench/locomo_recall.py) this took evidence recall@5/10/25/50 from
57.8/64.8/73.3/78.7 % (a fixed weighted sum of coverage, ts_rank and rescaled
cosine) to the figures in docs/benchmarks.md. The parameters were chosen on
those same questions (there is no held-out split; docs/benchmarks.md shows how
they did on each half of the conversations); the grid around them is flat.

``relevance`` stays an absolute measure (coverage, full-text rank, trigram and
rescaled cosine, each in [0, 1]): z-scores say which candidate is better, not
whether any is good enough, so the applicability floor uses ``relevance``.
``now`` is an argument, so the same input and the same instant give the same scores.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from memory.enums import SourceLevel
from memory.models import Memory
from memory.store.memory_text import lexical_parts, lexical_text
from memory.text import STOP_LEXEMES, lexemes

RECENCY_HALF_LIFE_DAYS = 90.0
HOTNESS_HALF_LIFE_DAYS = 7.0
"""Seed 004 §9.1: hotness = sigmoid(log1p(active_count)) × exp(-decay × age_days), half-life 7 days."""
SEMANTIC_FLOOR = 0.75
"""e5 cosine similarities of unrelated short texts sit around 0.7-0.8; below the floor counts as none."""

BM25_K1, BM25_B = 0.9, 0.4
"""Term-frequency saturation and length normalisation; short memories want little of either."""
LEXICAL_SHARE = 0.55
"""Weight of z(BM25) in the fused relevance; the cosine's z gets the rest. 0.6 was chosen when vector-only
R@5 on LoCoMo was 41; 0.55 once the memory text (the attributed message, a reply quoting what it answers)
had lifted it to 59 (docs/benchmarks.md, "The last points")."""
FEEDBACK_DOCS, FEEDBACK_TERMS, FEEDBACK_WEIGHT = 3, 20, 0.3
"""Pseudo-relevance feedback: lexemes of the top 3 candidates, the 20 most telling, at 0.3 of the query's weight."""
FEEDBACK_MIN_POOL = 30
"""Feedback needs contrast: in a pool of a handful, the "best three" are most of it, and their words are noise."""

QUOTED_WEIGHT = 0.4
"""What a word of a quoted message counts for in BM25 (a reply's ``replying to …, who said``): the quoted
message has a memory of its own, which a question in its words should find before the replies to it."""

RELEVANCE_WEIGHTS = {"semantic": 0.50, "coverage": 0.25, "fulltext": 0.10, "trigram": 0.25}
"""The absolute relevance (applicability floor, tie-breaker): each part is in [0, 1]. A near-spelling
(``word_similarity`` above pg_trgm's 0.6 threshold) counts like coverage: a misspelt word is still the word."""
PRIOR_WEIGHTS = {"trigram": 0.30, "recency": 0.04, "hotness": 0.03, "authority": 0.03, "confirmation": 0.02}
"""Added to the fused z-score: a near-spelling, then the priors."""
AUTHORITY = {SourceLevel.E1.value: 1.0, SourceLevel.E2.value: 0.9, SourceLevel.E3.value: 0.8, SourceLevel.E4.value: 0.4}


@dataclass(frozen=True)
class ScoreBreakdown:
    lexical: float
    """BM25 of the query's lexemes in this memory (statistics from the candidate pool)."""
    expansion: float
    """BM25 of the feedback lexemes (from the best candidates), already weighted into ``fused``."""
    coverage: float
    """Share of the query's lexemes the memory contains, weighted by their rarity among the candidates."""
    fulltext: float
    trigram: float
    semantic: float
    """Cosine similarity rescaled above :data:`SEMANTIC_FLOOR` to [0, 1]; 0 without a current vector."""
    cosine: float | None
    fused: float
    """0.55 z(BM25 + 0.3 expansion) + 0.45 z(cosine), z within the candidate pool."""
    recency: float
    hotness: float
    authority: float
    confirmation: float
    relevance: float
    total: float
    rerank: float | None = None
    """The reranker's score (:mod:`memory.recall.rerank`), for the top N it reordered; None otherwise."""

    def as_dict(self) -> dict[str, float | None]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Evidence:
    """What the candidate sources and the re-read know of one candidate."""

    memory: Memory
    sources: frozenset[str]
    fulltext_rank: float = 0.0
    trigram: float = 0.0
    cosine: float | None = None
    active_count: int = 0
    last_used_at: datetime | None = None


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


def own_tokens(memory: Memory) -> set[str]:
    """The memory's own lexemes (:func:`memory.store.memory_text.lexical_text`: what the full-text index holds)."""
    return set(lexemes(lexical_text(memory)))


Bag = Mapping[str, float]
"""A memory's lexemes and how much each counts: once per occurrence, a quoted one :data:`QUOTED_WEIGHT`."""


def lexical_bag(memory: Memory) -> Bag:
    """The memory's lexemes (:func:`memory.store.memory_text.lexical_parts`), quoted ones weighted down."""
    own, quoted = lexical_parts(memory)
    bag: dict[str, float] = dict(Counter(lexemes(own)))
    for term in lexemes(quoted):
        bag[term] = bag.get(term, 0.0) + QUOTED_WEIGHT
    return bag


def term_weights(terms: list[str], pool: Sequence[set[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of each term among the candidates: ``ln(1 + (N + 1) / (df + 1))``.

    Equal for every term when they are equally common (then coverage is the plain share of terms).
    """
    n = len(pool)
    return {term: math.log(1.0 + (n + 1) / (sum(1 for own in pool if term in own) + 1)) for term in terms}


def coverage(terms: list[str], memory: Memory, weights: Mapping[str, float] | None = None,
             own: set[str] | None = None) -> float:
    """Share of ``terms`` among all the memory's lexemes (quoted ones too), weighted by ``weights`` (IDF) if given."""
    if not terms:
        return 0.0
    own = own_tokens(memory) if own is None else own

    def weight(term: str) -> float:
        return weights.get(term, 1.0) if weights else 1.0

    total = sum(weight(term) for term in terms)
    return sum(weight(term) for term in terms if term in own) / total if total > 0 else 0.0


class PoolStatistics:
    """Document frequencies and mean length over the candidate pool: BM25 without corpus-wide statistics.

    On LoCoMo, pool statistics ranked within half a point of the whole conversation's, so no
    per-tenant term table (another derived copy for deletion to purge) is kept.
    """

    def __init__(self, bags: Sequence[Bag]) -> None:
        self.bags = bags
        self.n = len(bags)
        self.mean_length = sum(sum(b.values()) for b in bags) / self.n if self.n else 0.0
        self._df: dict[str, int] = {}

    def idf(self, term: str) -> float:
        if term not in self._df:
            self._df[term] = sum(1 for bag in self.bags if term in bag)
        df = self._df[term]
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def bm25(self, bag: Bag, terms: Sequence[str]) -> float:
        length = sum(bag.values())
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / self.mean_length) if self.mean_length else BM25_K1
        return sum(self.idf(t) * f * (BM25_K1 + 1.0) / (f + norm) for t in terms if (f := bag.get(t, 0.0)))


def z_scores(values: Sequence[float]) -> list[float]:
    """(x - mean) / population std within the pool; all 0 when the values do not vary."""
    if not values:
        return []
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / std if std > 1e-12 else 0.0 for v in values]


def fuse(lexical: Sequence[float], cosines: Sequence[float]) -> list[float]:
    return [
        LEXICAL_SHARE * a + (1.0 - LEXICAL_SHARE) * b
        for a, b in zip(z_scores(lexical), z_scores(cosines), strict=True)
    ]


def feedback_terms(bags: Sequence[Bag], order: Sequence[int], terms: Sequence[str],
                   stats: PoolStatistics) -> list[str]:
    """The most telling lexemes of the best :data:`FEEDBACK_DOCS` candidates that the query lacks.

    Weight: how many of those candidates hold the lexeme × its pool IDF; ties by first appearance.
    """
    top = [bags[i] for i in order[:FEEDBACK_DOCS]]
    seen: dict[str, int] = {}
    for bag in top:
        for term in bag:
            if term not in terms and term not in STOP_LEXEMES:
                seen.setdefault(term, len(seen))
    weight = {t: sum(1 for bag in top if t in bag) * stats.idf(t) for t in seen}
    return sorted(seen, key=lambda t: (-weight[t], seen[t]))[:FEEDBACK_TERMS]


def _decay(age_days: float, half_life: float) -> float:
    return math.exp(-math.log(2) * max(age_days, 0.0) / half_life)


def hotness(active_count: int, last_used_at: datetime | None, now: datetime) -> float:
    if active_count <= 0 or last_used_at is None:
        return 0.0
    sigmoid = 1.0 / (1.0 + math.exp(-math.log1p(active_count)))
    return sigmoid * _decay((now - last_used_at).total_seconds() / 86_400, HOTNESS_HALF_LIFE_DAYS)


def _priors(e: Evidence, now: datetime) -> dict[str, float]:
    memory = e.memory
    seen = memory.last_confirmed_at or memory.observed_at or memory.captured_at
    return {
        "recency": _decay((now - seen).total_seconds() / 86_400, RECENCY_HALF_LIFE_DAYS),
        "hotness": hotness(e.active_count, e.last_used_at, now),
        "authority": AUTHORITY.get(memory.source_level, 0.5) * memory.confidence,
        "confirmation": 1.0 if memory.last_confirmed_at is not None else (0.5 if memory.source_level != "E4" else 0.0),
    }


def score_pool(pool: Sequence[Evidence], terms: list[str], now: datetime) -> list[Scored]:
    """Score every candidate against the others (BM25 statistics, z-scores and feedback are pool-wide)."""
    if not pool:
        return []
    bags = [lexical_bag(e.memory) for e in pool]
    stats = PoolStatistics(bags)
    lexical = [stats.bm25(bag, terms) for bag in bags]
    present = [e.cosine for e in pool if e.cosine is not None]
    cosines = [e.cosine if e.cosine is not None else (min(present) if present else 0.0) for e in pool]
    first = fuse(lexical, cosines)
    # Best first; ties by memory id, so the feedback (and everything after it) is deterministic.
    order = sorted(range(len(pool)), key=lambda i: (-round(first[i], 9), str(pool[i].memory.memory_id)))
    expansion_terms = feedback_terms(bags, order, terms, stats) if terms and len(pool) >= FEEDBACK_MIN_POOL else []
    expansion = [stats.bm25(bag, expansion_terms) for bag in bags]
    fused = fuse([q + FEEDBACK_WEIGHT * x for q, x in zip(lexical, expansion, strict=True)], cosines)
    idf = term_weights(terms, [set(bag) for bag in bags])

    scored = []
    for i, e in enumerate(pool):
        semantic = max(0.0, (e.cosine - SEMANTIC_FLOOR) / (1.0 - SEMANTIC_FLOOR)) if e.cosine is not None else 0.0
        fulltext = e.fulltext_rank / (e.fulltext_rank + 1.0) if e.fulltext_rank > 0 else 0.0
        cover = coverage(terms, e.memory, idf, set(bags[i]))
        parts = {"semantic": semantic, "coverage": cover, "fulltext": fulltext, "trigram": e.trigram}
        relevance = sum(RELEVANCE_WEIGHTS[k] * parts[k] for k in RELEVANCE_WEIGHTS)
        priors = {"trigram": e.trigram, **_priors(e, now)}
        total = fused[i] + sum(PRIOR_WEIGHTS[k] * priors[k] for k in PRIOR_WEIGHTS)
        breakdown = ScoreBreakdown(
            lexical=lexical[i], expansion=expansion[i], coverage=cover, fulltext=fulltext, trigram=e.trigram,
            semantic=semantic, cosine=e.cosine, fused=fused[i], recency=priors["recency"], hotness=priors["hotness"],
            authority=priors["authority"], confirmation=priors["confirmation"], relevance=relevance, total=total,
        )
        scored.append(Scored(e.memory, e.sources, breakdown))
    return scored
