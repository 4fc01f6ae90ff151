"""Personal data and secrets out of a knowledge candidate before anything stores it (seed 003 §9).

What is redacted is recorded by kind and path (``{"kind": "phone", "path": "evidence/0/quote"}``), never the
value: not in a column, a log line or a workflow's history. Text is NFKC-normalised first, so full-width
digits (U+FF10-FF19) are digits. Numbers are judged on their digits with the separators people write
(spaces, dashes, dots, brackets): a span of digit groups is a Chinese resident ID (with a valid birth date), a
card number (Luhn), a mobile or landline number (Chinese and international forms) or a US SSN; a date, an amount
or a version is none of these. Secrets are recognised by the shapes providers give them and by their labels
(``api_key=…``, ``密码：…``). Redaction errs towards removing: a reviewer can ask for a value back, a leak
cannot be taken back.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    EMAIL = "email"
    PHONE = "phone"
    ID_NUMBER = "id_number"
    CARD_NUMBER = "card_number"
    API_KEY = "api_key"


def placeholder(kind: Kind) -> str:
    return f"[REDACTED:{kind.value}]"


@dataclass(frozen=True)
class Redaction:
    kind: str
    path: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "path": self.path}


_SECRETS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)(?<![A-Za-z0-9])bearer\s+[A-Za-z0-9._~+/=\-]{12,}"),
    re.compile(r"(?<![A-Za-z0-9_\-])(?=[A-Za-z0-9_\-]*[A-Z])(?=[A-Za-z0-9_\-]*[a-z])(?=[A-Za-z0-9_\-]*[0-9])"
               r"[A-Za-z0-9_\-]{32,}(?![A-Za-z0-9_\-])"),
]
"""Shapes of secrets: private keys, provider keys (OpenAI, AWS, GitHub, Slack, Google), JWTs, bearer tokens,
and any 32+ character token mixing upper case, lower case and digits (a lower-case hex digest is not one)."""

_LABELLED_SECRET = re.compile(
    r"(?i)((?:api[_\s-]?key|apikey|secret(?:[_\s-]?key)?|access[_\s-]?(?:key|token)|auth[_\s-]?token|token"
    r"|password|passwd|pwd|client[_\s-]?secret|密钥|秘钥|密码|口令|令牌)\s*(?:is\s+|为|是|[:=：])\s*['\"]?)"
    r"([^\s'\"，。,;；]{6,})"
)
_LABELLED_ID = re.compile(
    r"(?i)((?:passport(?:\s*(?:no\.?|number))?|护照(?:号码?)?|身份证(?:号码?)?|证件号码?|national\s+id(?:\s*(?:no\.?|number))?"
    r"|ID\s*(?:no\.?|number))\s*(?:is\s+|为|是)?[:：#]?\s*)([A-Za-z0-9]{6,20})"
)
_HK_ID = re.compile(r"(?<![A-Za-z0-9])[A-Z]{1,2}\d{6}\([0-9A]\)")
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_NUMBER_RUN = re.compile(
    r"(?<![A-Za-z0-9])\+?(?:\(\d{1,4}\)|\d)(?:[ .\-]?(?:\(\d{1,4}\)|\d)){5,30}[Xx]?(?![A-Za-z0-9])")
"""Digit groups with at most one separator between them; classified span by span (:func:`_classify`)."""
_GROUP = re.compile(r"\+|\d+[Xx]?|\(\d+\)")


def _luhn(digits: str) -> bool:
    total = 0
    for n, ch in enumerate(reversed(digits)):
        d = int(ch)
        if n % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cn_resident_id(digits: str) -> bool:
    """18 characters: area, a birth date 19xx/20xx that exists on a calendar, sequence, check digit or X."""
    if not re.fullmatch(r"[1-9]\d{16}[\dXx]", digits):
        return False
    year, month, day = int(digits[6:10]), int(digits[10:12]), int(digits[12:14])
    return year // 100 in (19, 20) and 1 <= month <= 12 and 1 <= day <= 31


def _classify(digits: str, raw: str) -> Kind | None:
    """What a span of digit groups is (``digits`` without separators, ``raw`` as written), or None."""
    if _cn_resident_id(digits):
        return Kind.ID_NUMBER
    if not digits.isdigit():
        return None
    if re.fullmatch(r"\d{3}-\d{2}-\d{4}", raw.strip()):
        return Kind.ID_NUMBER
    if raw.lstrip().startswith("+") and 8 <= len(digits) <= 15:
        return Kind.PHONE
    if re.fullmatch(r"(?:0?86)?1[3-9]\d{9}", digits) or re.fullmatch(r"0\d{9,11}", digits):
        return Kind.PHONE
    if 13 <= len(digits) <= 19 and _luhn(digits):
        return Kind.CARD_NUMBER
    if len(digits) == 10 and re.fullmatch(r"\(?\d{3}\)?[ .\-]?\d{3}[ .\-]\d{4}", raw.strip()):
        return Kind.PHONE
    return None


def _number_spans(text: str) -> list[tuple[int, int, Kind]]:
    """Spans of ``text`` that are personal numbers: within each run of digit groups, the longest classified span
    from each group on (so ``call 13800138000 2026`` finds the phone and leaves the year)."""
    spans: list[tuple[int, int, Kind]] = []
    for run in _NUMBER_RUN.finditer(text):
        groups = [(m.start() + run.start(), m.end() + run.start()) for m in _GROUP.finditer(run.group())]
        i = 0
        while i < len(groups):
            for j in range(len(groups), i, -1):
                start, end = groups[i][0], groups[j - 1][1]
                raw = text[start:end]
                kind = _classify(re.sub(r"[^\dXx]", "", raw), raw)
                if kind is not None:
                    spans.append((start, end, kind))
                    i = j
                    break
            else:
                i += 1
    return spans


def _replace_all(text: str, spans: list[tuple[int, int, Kind]]) -> str:
    for start, end, kind in sorted(spans, reverse=True):
        text = text[:start] + placeholder(kind) + text[end:]
    return text


def redact_text(text: str) -> tuple[str, list[Kind]]:
    """``text`` with every personal datum and secret replaced by its placeholder, and the kinds replaced."""
    text = unicodedata.normalize("NFKC", text)
    found: list[Kind] = []

    def sub(pattern: re.Pattern[str], kind: Kind, keep_label: bool = False) -> Callable[[str], str]:
        def apply(value: str) -> str:
            def one(m: re.Match[str]) -> str:
                found.append(kind)
                return (m.group(1) if keep_label else "") + placeholder(kind)
            return pattern.sub(one, value)
        return apply

    for pattern in _SECRETS:
        text = sub(pattern, Kind.API_KEY)(text)
    text = sub(_LABELLED_SECRET, Kind.API_KEY, keep_label=True)(text)
    text = sub(_EMAIL, Kind.EMAIL)(text)
    text = sub(_LABELLED_ID, Kind.ID_NUMBER, keep_label=True)(text)
    text = sub(_HK_ID, Kind.ID_NUMBER)(text)
    spans = _number_spans(text)
    found.extend(kind for _, _, kind in spans)
    return _replace_all(text, spans), found


def redact(value: Any, path: str = "") -> tuple[Any, list[Redaction]]:
    """``value`` (a JSON value) with every string redacted, and where: one :class:`Redaction` per kind and path.

    Object keys are paths, not data; they are kept (the caller validates them against a closed set)."""
    if isinstance(value, str):
        clean, kinds = redact_text(value)
        return clean, [Redaction(k.value, path) for k in dict.fromkeys(kinds)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        records: list[Redaction] = []
        for key, item in value.items():
            out[key], found = redact(item, f"{path}/{key}" if path else str(key))
            records += found
        return out, records
    if isinstance(value, list | tuple):
        items: list[Any] = []
        records = []
        for n, item in enumerate(value):
            clean_item, found = redact(item, f"{path}/{n}" if path else str(n))
            items.append(clean_item)
            records += found
        return items, records
    return value, []
