"""Fingerprints of deleted content as the search indexes hold it: runs of lexemes, and sets of them.

A search index does not hold the text: a ``tsvector`` holds :func:`memory.text.lexemes` (English words
stemmed, Chinese cut into overlapping character pairs) with their positions, and a posting table
(``memory_lexemes``) holds one lexeme per row, its owning row in another column. The text's unit
shingles (:mod:`.fingerprints`) never match either, so the barrier keeps two more kinds, in the same
table, told apart by its ``kind`` column (:class:`Kind`):

- lexeme runs: salted hashes of :data:`WIDTH` consecutive lexemes of a deleted text, matched along a
  tsvector's lexemes in position order by the same run rule as text (:class:`.fingerprints.Matcher`);
- posting windows: for each :data:`WINDOW` consecutive content lexemes (stop words left out) of a deleted
  text, the salted hashes of each; a row whose lexemes (a posting table's rows per owner, or a tsvector's
  lexemes, positions or not) include every lexeme of one window holds a copy. Five content words of one
  sentence together in one short row are rarely chance; a window the kept texts also have is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from memory.deletion.fingerprints import MAX_SHINGLES_PER_JOB, RUN, WIDTH, Matcher, _hash, fingerprint_shingles
from memory.text import STOP_LEXEMES, lexemes

WINDOW = 5
"""Content lexemes per posting window (a text with 3 or 4 has one window of all of them; fewer, none)."""
MAX_KNOWN_LEXEMES = 200_000
"""Lexeme hashes one scan remembers (bounds its memory)."""


class Kind(Enum):
    UNITS = "units"
    LEXEME_RUNS = "lexeme_runs"
    POSTING_WINDOWS = "posting_windows"


def run_shingle(sequence: Sequence[str], i: int) -> tuple[str, ...]:
    """The WIDTH consecutive lexemes from ``i`` (tagged, so no unit shingle hashes the same)."""
    return ("lexemes", *sequence[i : i + WIDTH])


def run_shingles(sequence: Sequence[str]) -> list[tuple[str, ...]]:
    """Each WIDTH consecutive lexemes, as :func:`run_shingle`."""
    return [run_shingle(sequence, i) for i in range(len(sequence) - WIDTH + 1)]


def run_hashes(salt: bytes, sequence: Sequence[str]) -> list[int]:
    """The fingerprints of each WIDTH consecutive lexemes."""
    return [_hash(salt, shingle) for shingle in run_shingles(sequence)]


def _lexeme_hash(salt: bytes, lexeme: str) -> int:
    return _hash(salt, ("lexeme", lexeme))


def _windows(sequence: Sequence[str]) -> list[frozenset[str]]:
    content = [lexeme for lexeme in sequence if lexeme not in STOP_LEXEMES]
    if len(set(content)) < WIDTH:
        return []
    if len(content) <= WINDOW:
        return [frozenset(content)]
    return [frozenset(content[i : i + WINDOW]) for i in range(len(content) - WINDOW + 1)]


def lexeme_fingerprints(salt: bytes, texts: Iterable[str], kept: Iterable[str], limit: int
                        ) -> tuple[list[set[int]], list[set[int]]]:
    """Both lexeme kinds, (runs, windows), cutting every text into lexemes once.

    A kept text that shares no lexeme with the deleted texts is left out before its runs and windows are built:
    every lexeme of a run or window equal to a deleted one is a deleted text's, so it could leave nothing out.
    The kept texts are a subject's thousands of other messages; built and hashed three times over, they cost a
    deletion's barrier ~2 s of the API's CPU for 2,000 CJK messages (issue 23's fairness benchmark)."""
    deleted = [lexemes(text) for text in texts]
    vocabulary = {lexeme for sequence in deleted for lexeme in sequence}
    relevant = [sequence for sequence in (lexemes(text) for text in kept) if not vocabulary.isdisjoint(sequence)]
    runs = fingerprint_shingles(salt, [run_shingles(sequence) for sequence in deleted],
                                {shingle for sequence in relevant for shingle in run_shingles(sequence)})
    return runs, _posting_windows(salt, deleted, relevant, limit)


def lexeme_runs(salt: bytes, texts: Iterable[str], kept: Iterable[str]) -> list[set[int]]:
    return lexeme_fingerprints(salt, texts, kept, MAX_SHINGLES_PER_JOB)[0]


def posting_windows(salt: bytes, texts: Iterable[str], kept: Iterable[str], limit: int) -> list[set[int]]:
    """Each window of the deleted texts as its lexemes' hashes, without the kept texts' windows (at most
    ``limit`` hashes in all)."""
    return lexeme_fingerprints(salt, texts, kept, limit)[1]


def _posting_windows(salt: bytes, deleted: Iterable[Sequence[str]], kept: Iterable[Sequence[str]], limit: int
                     ) -> list[set[int]]:
    keep = {window for sequence in kept for window in _windows(sequence)}
    out: list[set[int]] = []
    seen: set[frozenset[str]] = set(keep)
    total = 0
    for sequence in deleted:
        for window in _windows(sequence):
            if window in seen:
                continue
            if total + len(window) > limit:
                return out
            seen.add(window)
            out.append({_lexeme_hash(salt, lexeme) for lexeme in window})
            total += len(window)
    return out


_TSVECTOR_ENTRY = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


def tsvector_lexemes(value: str) -> list[tuple[int, str]]:
    """A tsvector's text form as (position, lexeme) pairs; a lexeme without positions is at position 0."""
    pairs: list[tuple[int, str]] = []
    for match in _TSVECTOR_ENTRY.finditer(value):
        lexeme = match.group(1).replace("''", "'").replace("\\\\", "\\")
        positions = [int(p.rstrip("ABCD")) for p in (match.group(2) or "0").split(",")]
        pairs.extend((position, lexeme) for position in positions)
    return sorted(pairs)


@dataclass
class IndexMatcher:
    """Finds copies of one job's texts in index representations: tsvectors and per-row lexeme sets."""

    salt: bytes
    runs: list[set[int]]
    windows: list[set[int]]
    _members: dict[int, list[int]] = field(default_factory=dict)
    _known: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._run_matcher = Matcher(self.salt, self.runs)
        for number, hashes in enumerate(self.windows):
            for h in hashes:
                self._members.setdefault(h, []).append(number)

    @property
    def empty(self) -> bool:
        return not self.runs and not self.windows

    def _hashes(self, row_lexemes: Iterable[str]) -> set[int]:
        """The lexemes' salted hashes, remembered: a tenant's rows share most of their words."""
        out: set[int] = set()
        for lexeme in row_lexemes:
            h = self._known.get(lexeme)
            if h is None:
                h = _lexeme_hash(self.salt, lexeme)
                if len(self._known) < MAX_KNOWN_LEXEMES:
                    self._known[lexeme] = h
            out.add(h)
        return out

    def holds_all_of_a_window(self, row_lexemes: Iterable[str]) -> bool:
        """Does this set of lexemes (one owning row's) include every lexeme of one deleted window?"""
        if not self._members:
            return False
        counts: dict[int, int] = {}
        for h in self._hashes(row_lexemes):
            for number in self._members.get(h, ()):
                counts[number] = counts.get(number, 0) + 1
                if counts[number] == len(self.windows[number]):
                    return True
        return False

    def tsvector_copies(self, value: str) -> bool:
        """A run of deleted lexemes in position order, or every lexeme of a window (a tsvector stripped of
        positions keeps its lexemes)."""
        pairs = tsvector_lexemes(value)
        sequence = [lexeme for _, lexeme in pairs]
        return (self._run_matcher.sampled_run(lambda i: run_shingle(sequence, i), len(sequence) - WIDTH + 1)
                or self.holds_all_of_a_window(sequence))


__all__ = ["RUN", "WINDOW", "IndexMatcher", "Kind", "lexeme_runs", "posting_windows",
           "run_hashes", "tsvector_lexemes"]
