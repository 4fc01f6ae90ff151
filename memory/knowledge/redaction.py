"""Personal data and secrets out of a knowledge candidate before anything stores it (seed 003 §9).

What is redacted is recorded by kind and path (``{"kind": "phone", "path": "evidence/0/quote"}``), never the
value: not in a column, a log line or a workflow's history. Invisible characters (zero-width spaces and joiners)
are removed, the text NFKC-normalised and every decimal digit made ASCII first, so a value cannot hide behind them
and full-width or Arabic-Indic digits are digits. Numbers are judged on their digits, whatever separators people
put between the groups (spaces, dashes of any width, dots, slashes, underscores) and whatever letters are glued
before them (``tel13800138000``): a span of digit groups is a Chinese resident ID (with a valid birth date), a
card number (grouped like a card whatever its checksum, or one run of digits that passes Luhn), a mobile or
landline number (Chinese and international forms) or a US SSN; dates, times, versions and hex digests are set
aside before numbers are looked for. Secrets are recognised by the shapes providers give them, by their labels
(``api_key=…``, ``{"password": "…"}``, ``密码：…``) and by where they sit (a URL's user:password, an
Authorization header). Redaction errs towards removing: a reviewer can ask for a value back, a leak cannot be
taken back.
"""

from __future__ import annotations

import base64
import binascii
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


_INVISIBLE = re.compile("[\u00ad\u200b-\u200d\u2060\ufeff]")
"""Zero-width spaces and joiners, the word joiner, the BOM and the soft hyphen: removed before anything else."""
_DIGIT = re.compile(r"(?![0-9])\d")
"""A decimal digit of another script (Arabic-Indic, Devanagari, …): made ASCII, so it is judged like any digit."""

_NOT_YET_REDACTED = r"(?!\[REDACTED:)"

_SECRETS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----|[A-Za-z0-9+/=\s]*)"),
    re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)(?<![A-Za-z0-9])bearer\s+" + _NOT_YET_REDACTED + r"[A-Za-z0-9._~+/=\-]{12,}"),
    re.compile(r"(?<![A-Za-z0-9_\-])(?=[A-Za-z0-9_\-]*[A-Z])(?=[A-Za-z0-9_\-]*[a-z])(?=[A-Za-z0-9_\-]*[0-9])"
               r"[A-Za-z0-9_\-]{32,}(?![A-Za-z0-9_\-])"),
    re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[0-9])"
               r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
]
"""Shapes of secrets: private keys (a block cut short too), provider keys (OpenAI, AWS, GitHub, Slack, Google),
JWTs, bearer tokens, any 32+ character token mixing upper case, lower case and digits (a lower-case hex digest is
not one) and any 40-character base64 token that does (an AWS secret access key carries ``/`` and ``+``)."""

_LABELS = (r"api[_\s-]?key|apikey|secret(?:[_\s-]?(?:access[_\s-]?)?key)?|access[_\s-]?(?:key|token)"
           r"|auth[_\s-]?token|refresh[_\s-]?token|session[_\s-]?(?:token|id)|token|password|passwd|passphrase|pwd"
           r"|client[_\s-]?secret|private[_\s-]?key|account[_\s-]?key|shared[_\s-]?access[_\s-]?key|credentials?"
           r"|signature|(?<![A-Za-z0-9])sig|密钥|秘钥|密码|口令|令牌")
_PLACED_SECRETS = [
    re.compile(r"(?i)(?:" + _LABELS + r")['\"]?\s*(?:is\s+|为|是|=>|[:=：])\s*(?P<q>['\"])?" + _NOT_YET_REDACTED
               + r"(?P<value>(?(q)[^'\"\n]{4,}|[^\s'\"，。,;；&]{6,}))"),
    re.compile(r"(?i)(?<![A-Za-z0-9])[a-z][a-z0-9+.\-]*://(?P<value>[^\s/@:]+:[^\s/]*)@(?=[^\s/@])"),
    re.compile(r"(?i)authorization['\"]?\s*[:=]\s*['\"]?(?:[a-z0-9\-]+\s+)?" + _NOT_YET_REDACTED
               + r"(?P<value>[^\s'\",;]{6,})"),
]
"""Secrets known by where they sit: after a label (bare, quoted as in JSON or a dict, or ``… is …``), as a URL's
``user:password``, as an Authorization header's credentials. Only the ``value`` group is replaced."""

_BASIC = re.compile(r"(?i)(?<![A-Za-z0-9])basic\s+(?P<value>[A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])")

_LABELLED_ID = re.compile(
    r"(?i)(?:passport(?:\s*(?:no\.?|number))?|护照(?:号码?)?|身份证(?:号码?)?|证件号码?|national\s+id(?:\s*(?:no\.?|number))?"
    r"|ID\s*(?:no\.?|number))\s*(?:is\s+|为|是)?[:：#]?\s*(?P<value>[A-Za-z0-9]{6,20})"
)
_HK_ID = re.compile(r"(?<![A-Za-z0-9])[A-Z]{1,2}\d{6}\([0-9A]\)")

_AT = r"(?:@|%40|\s*[(\[{]\s*at\s*[)\]}]\s*)"
_DOT = r"(?:\.|\s*[(\[{]\s*dot\s*[)\]}]\s*)"
_WIDE = r"[^\W\x00-\x7f]"
_EMAIL = re.compile(
    r"(?i)(?:(?<![A-Za-z0-9._%+\-])[A-Za-z0-9_%+\-][A-Za-z0-9._%+\-']*|(?<![\w.%+\-])" + _WIDE + r"+(?:\." + _WIDE
    + r"+)*)" + _AT + r"(?:[A-Za-z0-9\-]+(?:" + _DOT + r"[A-Za-z0-9\-]+)*" + _DOT + r"[A-Za-z]{2,}"
    + r"|[\w\-]+(?:\.[\w\-]+)*\.[^\W\d_]{2,})")
"""An address with an ASCII or a Chinese (IDN) local part and domain, its ``@`` written as ``@``, ``%40``, ``(at)``
or ``[at]`` and its dots as ``.`` or ``(dot)``."""

_NOT_A_NUMBER = re.compile(
    r"(?<![0-9A-Za-z])(?:[0-9a-f]{32,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?![0-9A-Za-z])"
    r"|(?<!\d)(?:(?:19|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])"
    r"|(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|1[0-2])[-/.](?:19|20)\d\d"
    r"|(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])/(?:19|20)\d\d)(?!\d)"
    r"|(?<!\d)\d{1,2}:\d\d(?::\d\d)?(?!\d)|(?<![A-Za-z])[vV]\d+(?:\.\d+)+")
"""Hex digests and UUIDs, dates, times and versions: set aside before digit groups are joined into numbers."""
_SEPARATOR = r"(?:[ \t]*[.\-/_\u2010-\u2015\u2212][ \t]*|[ \t]+)"
_NUMBER_RUN = re.compile(
    r"(?<!\d)\+?(?:\(\d{1,4}\)|\d)(?:" + _SEPARATOR + r"?(?:\(\d{1,4}\)|\d)){5,40}[Xx]?(?!\d)")
"""Digit groups with one separator (of any width, spaces around it allowed) between them, letters allowed before:
classified span by span (:func:`_classify`)."""
_GROUP = re.compile(r"\+|\d+|\(\d+\)|(?<=\d)[Xx]")


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


def _card_grouped(lengths: list[int]) -> bool:
    """Grouped as cards are printed: fours (the last group shorter), or 4-6-5 / 4-6-4 (American Express, Diners)."""
    fours = len(lengths) >= 4 and all(n == 4 for n in lengths[:-1]) and 1 <= lengths[-1] <= 4
    return fours or lengths in ([4, 6, 5], [4, 6, 4])


def _card_by_checksum(digits: str, raw: str) -> Kind | None:
    """A card however its groups are written, known by its Luhn digit alone: weak evidence, so across groups it is
    only asked once the strong shapes are redacted (``budget 1500 13800138000`` loses the phone, not the 1500)."""
    return Kind.CARD_NUMBER if digits.isdigit() and 13 <= len(digits) <= 19 and _luhn(digits) else None


def _classify(digits: str, raw: str) -> Kind | None:
    """What a span of digit groups is (``digits`` without separators, ``raw`` as written), or None."""
    if _cn_resident_id(digits):
        return Kind.ID_NUMBER
    if not digits.isdigit():
        return None
    lengths = [len(group) for group in re.findall(r"\d+", raw)]
    if 13 <= len(digits) <= 19 and _card_grouped(lengths):
        return Kind.CARD_NUMBER
    if lengths == [3, 2, 4] and not raw.startswith(("+", "(")):
        return Kind.ID_NUMBER
    if raw.startswith("+") and 8 <= len(digits) <= 15:
        return Kind.PHONE
    if re.fullmatch(r"(?:0?86)?1[3-9]\d{9}", digits) or re.fullmatch(r"0\d{9,11}", digits):
        return Kind.PHONE
    if len(lengths) == 1:
        return _card_by_checksum(digits, raw)
    if lengths == [3, 3, 4]:
        return Kind.PHONE
    return None


def _number_spans(text: str, classify: Callable[[str, str], Kind | None]) -> list[tuple[int, int, Kind]]:
    """Spans of ``text`` that are personal numbers: within each run of digit groups, the classified spans that
    cover the most digits (so ``call 13800138000 2026`` finds the phone and leaves the year, and no piece of a
    value is left beside it where another cut would have taken it whole; on a tie the leading groups stay).
    Dates, times, versions and digests are blanked out first (same length, so positions hold) and join no run."""
    searched = _NOT_A_NUMBER.sub(lambda m: "\x00" * len(m.group()), text)
    spans: list[tuple[int, int, Kind]] = []
    for run in _NUMBER_RUN.finditer(searched):
        groups = [(m.start() + run.start(), m.end() + run.start()) for m in _GROUP.finditer(run.group())]
        best: list[tuple[int, list[tuple[int, int, Kind]]]] = [(0, [])] * (len(groups) + 1)
        for i in range(len(groups) - 1, -1, -1):
            best[i] = best[i + 1]  # group i stays
            for j in range(len(groups), i, -1):
                raw = text[groups[i][0]:groups[j - 1][1]]
                digits = re.sub(r"[^\dXx]", "", raw)
                kind = classify(digits, raw)
                if kind is not None and len(digits) + best[j][0] > best[i][0]:
                    best[i] = (len(digits) + best[j][0], [(groups[i][0], groups[j - 1][1], kind), *best[j][1]])
        spans += best[0][1]
    return spans


def _replace_all(text: str, spans: list[tuple[int, int, Kind]]) -> str:
    for start, end, kind in sorted(spans, reverse=True):
        text = text[:start] + placeholder(kind) + text[end:]
    return text


def _basic_credentials(value: str) -> bool:
    """Whether ``value`` is what HTTP Basic carries: base64 of ``user:password`` (so ``basic settings`` is not)."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in decoded and decoded.isprintable()


def redact_text(text: str) -> tuple[str, list[Kind]]:
    """``text`` with every personal datum and secret replaced by its placeholder, and the kinds replaced."""
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))
    text = _DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)
    found: list[Kind] = []

    def sub(pattern: re.Pattern[str], kind: Kind,
            accept: Callable[[str], bool] = lambda _: True) -> Callable[[str], str]:
        """Replace each match (or only its ``value`` group, when the pattern has one) that ``accept`` takes."""
        def apply(value: str) -> str:
            def one(m: re.Match[str]) -> str:
                part = "value" if "value" in pattern.groupindex else 0
                if not accept(m.group(part)):
                    return m.group()
                found.append(kind)
                start, end = m.start(part) - m.start(), m.end(part) - m.start()
                return m.group()[:start] + placeholder(kind) + m.group()[end:]
            return pattern.sub(one, value)
        return apply

    for pattern in _SECRETS + _PLACED_SECRETS:
        text = sub(pattern, Kind.API_KEY)(text)
    text = sub(_BASIC, Kind.API_KEY, _basic_credentials)(text)
    text = sub(_EMAIL, Kind.EMAIL)(text)
    text = sub(_LABELLED_ID, Kind.ID_NUMBER)(text)
    text = sub(_HK_ID, Kind.ID_NUMBER)(text)
    for classify in (_classify, _card_by_checksum):
        spans = _number_spans(text, classify)
        found.extend(kind for _, _, kind in spans)
        text = _replace_all(text, spans)
    return text, found


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
