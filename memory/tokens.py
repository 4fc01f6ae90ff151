"""The one token count mnemo uses everywhere: bundle budgets, session windows, summaries, commit stats.

Model-free on purpose. mnemo does not know which model will read a window (any OpenAI-compatible
endpoint, or none), so no model's tokenizer is "the" right one; this estimate is deterministic, costs
microseconds, runs no native code in the API process (the bundled embedding engine once corrupted the
heap of the process calling it: issue 12) and errs high for CJK text, where BPE tokenizers spend about
one token per character, and for English, where they spend about 1.3 per word.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_WORD = re.compile(r"[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")

MESSAGE_OVERHEAD = 8
"""Per item: role or markup around the text."""


def count_tokens(content: str) -> int:
    """One token per CJK character, ~1.3 per other word, plus :data:`MESSAGE_OVERHEAD`."""
    return len(_CJK.findall(content)) + math.ceil(1.3 * len(_WORD.findall(content))) + MESSAGE_OVERHEAD


def within_budget(ranked: Iterable[T], limit: int, budget: int, text_of: Callable[[T], str]) -> tuple[list[T], bool]:
    """In rank order, up to ``limit`` items, each whose tokens still fit ``budget`` (a smaller one after a
    too-large one may), and whether one did not fit: one rule for every quota of a bundle."""
    kept: list[T] = []
    used = 0
    truncated = False
    for item in ranked:
        if len(kept) >= limit:
            break
        cost = count_tokens(text_of(item))
        if used + cost > budget:
            truncated = True
            continue
        used += cost
        kept.append(item)
    return kept, truncated
