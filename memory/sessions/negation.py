"""Negation words in Chinese and English: what makes "I like X" and "I don't like X" opposite statements.

Trigram similarity sees the two as near-duplicates (0.9); de-duplication must not skip one as the other.
"""

from __future__ import annotations

import re

NEGATION = re.compile(
    r"不|没|未|无|非|别|勿|\bnot\b|\bno\b|\bnever\b|n['\u2019\u02bc\uff07\u2032]t\b|\bwithout\b|\bnone\b|\bneither\b|"
    r"\bnor\b",
    re.IGNORECASE,
)
"""``n't`` with any apostrophe a keyboard types: "I don\u2019t like X" was no negation of "I like X" and was
skipped as its near duplicate (issue 23 re-probe)."""


def negations(text: str) -> int:
    """How many negation words ``text`` holds (two statements differing in it may say opposite things)."""
    return len(NEGATION.findall(text))
