"""Negation words in Chinese and English: what makes "I like X" and "I don't like X" opposite statements.

Trigram similarity sees the two as near-duplicates (0.9); de-duplication must not skip one as the other.
"""

from __future__ import annotations

import re

NEGATION = re.compile(
    r"不|没|未|无|非|别|勿|\bnot\b|\bno\b|\bnever\b|n't\b|\bwithout\b|\bnone\b|\bneither\b|\bnor\b", re.IGNORECASE
)


def negations(text: str) -> int:
    """How many negation words ``text`` holds (two statements differing in it may say opposite things)."""
    return len(NEGATION.findall(text))
