"""Response preferences named in text, and the markers that make one temporary ("这次用英文", "just this once").

One vocabulary for the session state (a temporary constraint is state), the gates (it is never stored
as a preference) and the rules extractor (without a temporary marker it is a preference).
"""

from __future__ import annotations

import re

_TEMPORARY = re.compile(
    r"这次|这一次|本次|这回|这一回|今天先|暂时|临时|先用|"
    r"\bjust this once\b|\bthis time\b|\bfor now\b|\bonly (?:this|for this) (?:time|once|answer|reply|one)\b|"
    r"\bfor this (?:answer|reply|one|message|report)\b|\bjust for (?:today|now)\b",
    re.IGNORECASE,
)

_SLOTS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("response.output_format", "plain_text", re.compile(r"纯文本|plain[ -]?text|no markdown", re.IGNORECASE)),
    ("response.output_format", "markdown", re.compile(r"(?<!no )markdown", re.IGNORECASE)),
    ("response.output_format", "table", re.compile(r"表格|\bas a table\b|\bin a table\b|\btables\b", re.IGNORECASE)),
    ("response.language", "en", re.compile(r"英文|英语|\bin english\b|\benglish\b", re.IGNORECASE)),
    ("response.language", "zh", re.compile(r"中文|汉语|\bin chinese\b|\bchinese\b", re.IGNORECASE)),
    ("response.verbosity", "brief", re.compile(r"简短|简洁|简要|\bbrief\b|\bshort answers?\b|\bconcise\b", re.I)),
    ("response.verbosity", "detailed", re.compile(r"详细|\bdetailed\b|\bin detail\b", re.IGNORECASE)),
)


def slots_in(text: str) -> dict[str, str]:
    """The response preferences ``text`` names, by key (the first value named wins per key)."""
    found: dict[str, str] = {}
    for key, value, pattern in _SLOTS:
        if key not in found and pattern.search(text):
            found[key] = value
    return found


def is_temporary(text: str) -> bool:
    """Does ``text`` limit what it asks to now ("这次", "this time", "for now")?"""
    return _TEMPORARY.search(text) is not None


def temporary_constraints(text: str) -> dict[str, str]:
    """The preferences ``text`` sets for this time only: session state, never a stored preference."""
    return slots_in(text) if is_temporary(text) else {}
