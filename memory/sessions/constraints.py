"""Response preferences named in text, and the markers that make one temporary ("这次用英文", "just this once").

One vocabulary for the session state (a temporary constraint is state), the gates (it is never stored
as a preference) and the rules extractor (without a temporary marker it is a preference).

A slot named under a negation ("不要英文", "no tables") is not named: "这次不要用英文" must never become
"this time in English", nor three such sessions a stable preference for English.
"""

from __future__ import annotations

import re

from memory.sessions.extraction.sentences import all_clauses

_TEMPORARY = re.compile(
    r"这次|这一次|本次|这回|这一回|今天先|暂时|临时|先用|先别|先不要|先不用|这个回答|这条回答|这轮|本轮|"
    r"这段对话|这个对话|这个会话|本会话|接下来(?:的)?几[个条次]|"
    r"\bjust this once\b|\bthis time\b|\bfor now\b|\bonly (?:this|for this) (?:time|once|answer|reply|one)\b|"
    r"\bfor this (?:answer|reply|one|message|report|session|conversation|chat|thread)\b|\bjust for (?:today|now)\b|"
    r"\bin this (?:session|conversation|chat|thread)\b|\bfor the (?:next|following) (?:few |\w+ )?"
    r"(?:answers?|replies|reply|messages?|responses?|questions?)\b|\bfor the rest of (?:this|the) "
    r"(?:session|conversation|chat|thread)\b|\btemporarily\b",
    re.IGNORECASE,
)
_NOW = re.compile(
    r"今天|今晚|这周|本周|这几天|这两天|目前|眼下|\bright now\b|\btoday\b|\btonight\b|\bthis week\b|"
    r"\bat the moment\b|\bcurrently\b",
    re.IGNORECASE,
)
"""Words of time that limit a response preference to now ("今天我比较喜欢简短的回答") but not a fact or an
event ("今天下午三点开会" stays an event): they count only beside a response slot."""

_SLOTS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("response.output_format", "plain_text", re.compile(r"纯文本|plain[ -]?text|no markdown", re.IGNORECASE)),
    ("response.output_format", "markdown", re.compile(r"markdown", re.IGNORECASE)),
    ("response.output_format", "table", re.compile(r"表格|\bas a table\b|\bin a table\b|\btables\b", re.IGNORECASE)),
    ("response.language", "en", re.compile(r"英文|英语|\bin english\b|\benglish\b", re.IGNORECASE)),
    ("response.language", "zh", re.compile(r"中文|汉语|\bin chinese\b|\bchinese\b", re.IGNORECASE)),
    ("response.verbosity", "brief", re.compile(r"简短|简洁|简要|\bbrief\b|\bshort answers?\b|\bconcise\b", re.I)),
    ("response.verbosity", "detailed", re.compile(r"详细|\bdetailed\b|\bin detail\b", re.IGNORECASE)),
)

_NEGATION = re.compile(
    r"不要|不用|不想|不需要|不必|不喜欢|不是|而非|讨厌|别|没|勿|"
    r"\bno\b|\bnot\b|\bdon'?t\b|\bdo not\b|\bnever\b|\bwithout\b|\bavoid\b|\bstop\b|\bhate\b|\bdislike\b|"
    r"\binstead of\b|\brather than\b",
    re.IGNORECASE,
)
_NEGATION_REACH = 12
"""How many characters before a slot a negation still governs it ("不要用太多英文", "no more tables")."""


def _named(clause: str) -> list[tuple[int, str, str]]:
    """(position, key, value) of each slot the clause names and does not negate, in the order named.

    A negation governs the slot right after it, not one past another slot: "不要表格用英文" refuses the
    table and asks for English."""
    matches = sorted(
        (match.start(), match.end(), key, value)
        for key, value, pattern in _SLOTS
        for match in pattern.finditer(clause)
    )
    named: list[tuple[int, str, str]] = []
    for start, _end, key, value in matches:
        before = max([end for other, end, _, _ in matches if end <= start and other < start], default=0)
        window = clause[max(before, start - _NEGATION_REACH) : start]
        if not _NEGATION.search(window):
            named.append((start, key, value))
    return named


def slots_in(text: str) -> dict[str, str]:
    """The response preferences ``text`` names, by key, clause by clause: the first value named and not
    negated wins per key ("这次用中文，不要英文" names only ``zh``)."""
    found: dict[str, str] = {}
    for clause in all_clauses(text):
        for _position, key, value in _named(clause.text):
            found.setdefault(key, value)
    return found


def keys_spoken_of(text: str) -> tuple[str, ...]:
    """The response slots ``text`` speaks of at all, asked for or refused ("不要用表格" speaks of the output
    format): what a constraint is about, where :func:`slots_in` is what it asks for."""
    return tuple(dict.fromkeys(key for key, _value, pattern in _SLOTS if pattern.search(text)))


def mentions_a_slot(text: str) -> bool:
    """Does ``text`` speak of a response slot at all ("不要英文" does)?"""
    return bool(keys_spoken_of(text))


def is_temporary(text: str) -> bool:
    """Does ``text`` limit what it asks to now ("这次", "this time", "for now", "今天…简短的回答")?"""
    if _TEMPORARY.search(text):
        return True
    return any(_NOW.search(clause.text) and _named(clause.text) for clause in all_clauses(text))


def temporary_constraints(text: str) -> dict[str, str]:
    """The preferences ``text`` sets for this time only: session state, never a stored preference."""
    return slots_in(text) if is_temporary(text) else {}
