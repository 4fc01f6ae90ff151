"""Fingerprints of deleted content: salted hashes of overlapping shingles, never the text.

A text is normalised (NFKC, case-folded) and cut into units: each CJK character is one unit (CJK has
no spaces), each run of other letters and digits is one. A shingle is :data:`WIDTH` consecutive units;
its fingerprint is the first 8 bytes of ``sha256(salt || shingle)`` (the salt is the job's id, so a
fingerprint says nothing without the job, and the same text gives different hashes in two jobs).

A scanned value holds a copy of a deleted text when it contains a run of consecutive shingles all
from that text, as long as :data:`RUN` shingles, or as the text itself when it is shorter: a
verbatim copy inside a longer text is found, a shared common phrase ("I live in") is not.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

WIDTH = 3
"""Units per shingle: a text shorter than this has no fingerprint (too short to tell a copy from chance)."""
RUN = 4
"""Consecutive matching shingles (WIDTH + RUN - 1 = 6 units verbatim) that make a copy of a longer text."""
MAX_SHINGLES_PER_JOB = 200_000
"""Bounds the barrier's work and the scan's memory; beyond it, later texts are fingerprinted no further."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_UNIT = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


def units(text: str) -> list[str]:
    return _UNIT.findall(unicodedata.normalize("NFKC", text).casefold())


def _hash(salt: bytes, shingle: tuple[str, ...]) -> int:
    digest = hashlib.sha256(salt + "\x1f".join(shingle).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def unit_shingles(text: str) -> list[tuple[str, ...]]:
    """The text's shingles, in order (repeats kept: a run is counted along the text)."""
    parts = units(text)
    return [tuple(parts[i : i + WIDTH]) for i in range(len(parts) - WIDTH + 1)]


def shingle_hashes(salt: bytes, text: str) -> list[int]:
    """The text's shingles' fingerprints, in order."""
    return [_hash(salt, shingle) for shingle in unit_shingles(text)]


def fingerprint(salt: bytes, texts: Iterable[str], kept: Iterable[str] = (),
                cut: Callable[[str], list[tuple[str, ...]]] = unit_shingles) -> list[set[int]]:
    """One fingerprint set per deleted text, minus the shingles of ``kept`` texts (what the deletion
    deliberately keeps, e.g. the messages a deleted memory came from: they are no copy of it).
    ``cut`` cuts a text into shingles (units by default; :mod:`.index_fingerprints` passes lexeme runs).
    The kept texts are compared as shingles, never hashed: they can be thousands of the subject's messages,
    and hashing them all took most of a barrier's time (issue 23's fairness benchmark)."""
    keep = {shingle for text in kept for shingle in cut(text)}
    return fingerprint_shingles(salt, [cut(text) for text in texts], keep)


def fingerprint_shingles(salt: bytes, texts: Iterable[list[tuple[str, ...]]], keep: set[tuple[str, ...]]
                         ) -> list[set[int]]:
    """:func:`fingerprint` of texts already cut into shingles: each one's hashes but for the ``keep`` shingles."""
    sets: list[set[int]] = []
    seen: set[frozenset[int]] = set()
    total = 0
    for shingles in texts:
        hashes = {_hash(salt, shingle) for shingle in set(shingles) - keep}
        if not hashes or frozenset(hashes) in seen:
            continue
        if total + len(hashes) > MAX_SHINGLES_PER_JOB:
            break
        seen.add(frozenset(hashes))
        sets.append(hashes)
        total += len(hashes)
    return sets


@dataclass
class Matcher:
    """Finds copies of any of one job's texts in a value (all texts share the job's salt)."""

    salt: bytes
    texts: list[set[int]]
    _owners: dict[int, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for number, hashes in enumerate(self.texts):
            for h in hashes:
                self._owners.setdefault(h, []).append(number)
        self._stride = min((min(RUN, len(hashes)) for hashes in self.texts if hashes), default=1)

    def copies(self, value: str) -> bool:
        """Does ``value`` hold a copy of one of the texts?"""
        return self.holds(units(value))

    def holds(self, parts: list[str]) -> bool:
        """Do these units (a value's :func:`units`, cut once for every job a scan matches) hold a copy?"""
        return self.sampled_run(lambda i: tuple(parts[i : i + WIDTH]), len(parts) - WIDTH + 1)

    def sampled_run(self, shingle: Callable[[int], tuple[str, ...]], count: int) -> bool:
        """:meth:`run` over the ``count`` shingles ``shingle(0..count-1)``, hashing few of them: a copy is a run of
        at least ``stride`` (the shortest run any text needs) deleted shingles, so it holds one of every
        ``stride``-th shingle; only where one of those is deleted are its neighbours hashed and the run counted.
        The same answer as :meth:`run` over every hash (a property test says), for a fraction of the hashing
        that made the residue scan the worker's main cost (issue 23, finding 7)."""
        if not self._owners or count <= 0:
            return False
        known: dict[int, int] = {}

        def hashed(i: int) -> int:
            if i not in known:
                known[i] = _hash(self.salt, shingle(i))
            return known[i]

        near: set[int] = set()
        for i in range(0, count, self._stride):
            if hashed(i) in self._owners:
                near.update(range(max(0, i - RUN + 1), min(count, i + RUN)))
        segment: list[int] = []
        for i in sorted(near):  # each stretch of consecutive positions counted on its own, as run() counts
            if segment and i != segment[-1] + 1:
                if self.run(hashed(j) for j in segment):
                    return True
                segment = []
            segment.append(i)
        return bool(segment) and self.run(hashed(j) for j in segment)

    def run(self, hashes: Iterable[int]) -> bool:
        """Do these shingle fingerprints, in order, hold a run of one of the texts?"""
        if not self._owners:
            return False
        runs: dict[int, int] = {}
        for h in hashes:
            owners = self._owners.get(h, ())
            runs = {number: runs.get(number, 0) + 1 for number in owners}
            for number, length in runs.items():
                if length >= min(RUN, len(self.texts[number])):
                    return True
        return False


def strings(value: object) -> Iterator[str]:
    """Every string inside a JSON value or an array, as stored."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def salt_of(job_id: uuid.UUID) -> bytes:
    return job_id.bytes


__all__ = ["Matcher", "fingerprint", "salt_of", "shingle_hashes", "strings", "units"]
