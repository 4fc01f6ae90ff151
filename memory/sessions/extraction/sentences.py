"""Sentences and clauses of a message, as verbatim slices of it (so a candidate quotes, never rewrites).

A sentence ends at 。！？!?；; or a line break, and at ``.`` only when a space or the end follows (so
``3.5`` and ``v1.2`` stay whole). A clause ends at a comma (full-width ``，`` or ``、``, or ``,`` followed by
a space or a CJK character): the rules extractor groups clauses into statements, and the gates judge a
temporary marker per clause ("以后都用英文，这次先用中文" is one stable preference and one temporary one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"[。！？!?；;\n]+|\.+(?=\s|$)")
_CLAUSE_END = re.compile(r"[，、]|,(?=\s|[\u3400-\u9fff])")


@dataclass(frozen=True)
class Span:
    """A verbatim slice ``text[start:end]`` of the message it came from."""

    start: int
    end: int
    text: str


def _pieces(text: str, offset: int, boundary: re.Pattern[str]) -> list[Span]:
    spans: list[Span] = []
    start = 0
    for match in boundary.finditer(text):
        spans.extend(_trimmed(text, start, match.start(), offset))
        start = match.end()
    spans.extend(_trimmed(text, start, len(text), offset))
    return spans


def _trimmed(text: str, start: int, end: int, offset: int) -> list[Span]:
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return []
    lead = len(piece) - len(piece.lstrip())
    begin = offset + start + lead
    return [Span(begin, begin + len(stripped), stripped)]


def sentences(text: str) -> list[Span]:
    """The sentences of ``text``, without their closing marks and surrounding blanks."""
    return _pieces(text, 0, _SENTENCE_END)


def clauses(sentence: Span) -> list[Span]:
    """The comma-separated clauses of one sentence, with offsets into the whole message."""
    return _pieces(sentence.text, sentence.start, _CLAUSE_END)


def all_clauses(text: str) -> list[Span]:
    """Every clause of every sentence of ``text``."""
    return [clause for sentence in sentences(text) for clause in clauses(sentence)]
