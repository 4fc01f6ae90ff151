"""The one cross-resource ranker of search (seed 000 §4.2): every type's candidates on one scale.

Each candidate, re-read from its source, gets a weighted sum of signals in [0, 1]:

- lexical relevance (dominant): 0.7 × the share of query terms its readable fields hold + 0.3 × its
  normalised ``ts_rank``;
- state: open (a todo still to do) 1, no state 0.5, closed (done, cancelled) 0 — it outweighs recency,
  so a completed todo ranks below an open one that matches as well, however recently it was completed;
- recency: halves every :data:`HALF_LIFE_DAYS` days since the record's last change;
- type: a fixed prior (a meeting's episode before its raw transcript);
- confidence: what the source says of the row (business records 1.0);
- semantic: an optional similarity a source may supply one day; its weight is 0 until one does, so the
  slot changes no score today.

A signal the caller may not know (its state, confidence or time of change comes from a field it does not read:
:mod:`memory.resources.derived`) is dropped for that caller: it weighs 0, so no score or order carries it.

Ties break by ref, so the same rows and the same ``now`` always give the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory.resources.derived import Shown
from memory.resources.sources import Candidate, RowState

WEIGHTS = {"lexical": 0.55, "state": 0.2, "recency": 0.1, "type": 0.05, "confidence": 0.1, "semantic": 0.0}
HALF_LIFE_DAYS = 30.0
STATE_VALUE = {RowState.OPEN: 1.0, RowState.NONE: 0.5, RowState.CLOSED: 0.0, RowState.WITHHELD: 0.0}
TYPE_PRIOR = {"episode": 1.0, "todo": 0.9, "calendar": 0.85, "contact": 0.8, "voice_memo": 0.7, "digest": 0.6,
              "transcript": 0.6, "intent": 0.5, "user_profile": 0.5}
DEFAULT_TYPE_PRIOR = 0.5


@dataclass(frozen=True)
class Ranked:
    row: Shown
    candidate: Candidate
    score: float


def score(candidate: Candidate, row: Shown, now: datetime, semantic: float | None = None) -> float:
    age_days = None if row.updated_at is None else max(0.0, (now - row.updated_at).total_seconds() / 86_400)
    signals = {
        "lexical": 0.7 * candidate.coverage + 0.3 * candidate.rank,
        "state": STATE_VALUE[row.state],
        "recency": 0.0 if age_days is None else 0.5 ** (age_days / HALF_LIFE_DAYS),
        "type": TYPE_PRIOR.get(row.resource, DEFAULT_TYPE_PRIOR),
        "confidence": 0.0 if row.confidence is None else min(1.0, max(0.0, row.confidence)),
        "semantic": semantic or 0.0,
    }
    return round(float(sum(WEIGHTS[name] * value for name, value in signals.items())), 6)


def rank(pairs: list[tuple[Candidate, Shown]], now: datetime) -> list[Ranked]:
    """Best first, one per ref (its best score kept)."""
    best: dict[str, Ranked] = {}
    for candidate, row in pairs:
        ranked = Ranked(row, candidate, score(candidate, row, now))
        kept = best.get(row.ref)
        if kept is None or ranked.score > kept.score:
            best[row.ref] = ranked
    return sorted(best.values(), key=lambda ranked: (-ranked.score, ranked.row.ref))
