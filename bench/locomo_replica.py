"""LoCoMo evidence recall through a replica of recall's candidate stage and the product's own ranking, in minutes.

``bench/locomo_recall.py`` measures the real path (HTTP, PostgreSQL, the Temporal sweep) and takes 15-45
minutes on two shared cores; this answers "what would a ranking or text-rule change do?" in a few, from the
same data. Each turn becomes a :class:`memory.models.Memory` through the product's own rules (the message
``bench/locomo_recall.py`` sends, read by the API's schema, its content from :mod:`memory.store.message_text`, the
session date as ``observed_at``), is embedded with the bundled engine
(``passage: ``; questions ``query: `` cut to :data:`memory.embedders.engine.QUERY_MAX_CHARS`) and scored by the
product's :func:`memory.recall.scoring.score_pool`. Only the candidate sources are imitated: full text
proposes the memories holding a query lexeme of :func:`memory.store.memory_text.lexical_text`, ranked as
PostgreSQL's ``ts_rank`` ranks an OR query (newest first on ties; each term's newest postings, as
:func:`memory.recall.candidates.fulltext_candidates` walks them), and vector the exact nearest; 200 of each.
Not imitated: trigram near-spellings (LoCoMo's full text always fills its cap), the HNSW approximation and
hotness from earlier questions. Checked against the real path in docs/benchmarks.md.

    .venv/bin/python -m bench.locomo_replica --data ../shared/bench-data/locomo/locomo10.json --cache /tmp/v.npz
"""

from __future__ import annotations

import argparse
import json
import math
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from api.schemas.memories import MessageIn
from bench.dense_text_ablation import Vectors
from bench.harness import say
from bench.locomo_recall import evidence_of, parse_date, recall_at, sessions, turn_message
from memory.embedders.engine import QUERY_MAX_CHARS
from memory.models import Memory
from memory.recall.candidates import EXAMINED_PER_CANDIDATE
from memory.recall.scoring import Evidence, score_pool
from memory.store.memory_text import embedding_text, lexical_text
from memory.store.message_text import message_content, quote_start
from memory.text import lexemes, search_terms

CAP = 200
"""Candidates per source, as bench/locomo_recall.py asks (``candidate_limit``)."""
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def memories(sample: dict[str, Any]) -> tuple[list[Memory], list[str]]:
    """The conversation's memories in ingest order (revision = order) and their dia_ids."""
    found: list[Memory] = []
    ids: list[str] = []
    for _, date, turns in sessions(sample["conversation"]):
        when = parse_date(date) or NOW
        for place, turn in enumerate(turns):
            # As POST /memory-candidates reads the message bench/locomo_recall.py sends.
            message = MessageIn.model_validate(turn_message(turn, turns[place - 1] if place else None))
            said = message.said()
            found.append(Memory(key=None, abstract=None, overview=None, content=message_content(said),
                                quote_start=quote_start(said), observed_at=when,
                                captured_at=when, memory_id=uuid.UUID(int=len(found) + 1), revision=len(found) + 1,
                                version=1, source_level="E2", confidence=1.0, last_confirmed_at=None))
            ids.append(str(turn["dia_id"]))
    return found, ids


def ts_rank(bag: Counter[str], terms: list[str]) -> float:
    """PostgreSQL's ``ts_rank`` of an OR query over unweighted positions, normalised with rank/(rank+1)."""
    unique = list(dict.fromkeys(terms))
    rank = sum(sum(1.0 / (j * j) for j in range(1, bag[t] + 1)) for t in unique) * 0.01 / 1.64493406685 / len(unique)
    return rank / (rank + 1.0)


def fulltext(bags: list[Counter[str]], terms: list[str]) -> dict[int, float]:
    if not terms:
        return {}
    per_term = max(CAP, math.ceil(EXAMINED_PER_CANDIDATE * CAP / len(set(terms))))
    walked = {i for t in set(terms) for i in [i for i, bag in enumerate(bags) if bag[t]][-per_term:]}
    ranked = sorted(walked, key=lambda i: (-ts_rank(bags[i], terms), -i))[:CAP]
    return {i: ts_rank(bags[i], terms) for i in ranked}


def ranked(sample: dict[str, Any], vectors: Vectors, mode: str) -> list[tuple[list[str], list[str], Any]]:
    """(top 50 dia_ids, evidence, category) per question of one conversation."""
    found, ids = memories(sample)
    qas = sample.get("qa", [])
    cosines = vectors.of("query", [str(qa["question"])[:QUERY_MAX_CHARS] for qa in qas]) @ \
        vectors.of("passage", [embedding_text(m) for m in found]).T
    bags = [Counter(lexemes(lexical_text(m))) for m in found]
    out = []
    for qa, row in zip(qas, cosines, strict=True):
        terms = search_terms(str(qa["question"])) if mode != "semantic" else []
        pool = fulltext(bags, terms)
        if mode != "lexical":
            for i in np.argsort(-row, kind="stable")[:CAP]:
                pool.setdefault(int(i), 0.0)
        evidence = [Evidence(found[i], frozenset(), rank, 0.0, None if mode == "lexical" else float(row[i]))
                    for i, rank in pool.items()]
        top = sorted(score_pool(evidence, terms, NOW), key=lambda s: s.rank_key)[:50]
        out.append(([ids[s.memory.revision - 1] for s in top], evidence_of(qa), qa.get("category")))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file (a list of samples)")
    parser.add_argument("--modes", default="hybrid,lexical,semantic")
    parser.add_argument("--k", default="5,10,25,50")
    parser.add_argument("--cache", type=Path, help="an .npz of vectors by text, read and extended")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    ks = sorted({int(k) for k in args.k.split(",")})
    samples = json.loads(args.data.read_text())
    samples = [samples] if isinstance(samples, dict) else samples
    vectors = Vectors(args.cache, None)
    figures: dict[str, dict[str, float]] = {}
    for mode in args.modes.split(","):
        results = [r for sample in samples for r in ranked(sample, vectors, mode)]
        figures[mode] = {str(k): 100 * sum(recall_at(t, e, k) for t, e, _ in results) / len(results) for k in ks}
        say(f"replica {mode:<8}" + "".join(f"  R@{k} {figures[mode][str(k)]:5.1f}" for k in ks))
    vectors.save()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
