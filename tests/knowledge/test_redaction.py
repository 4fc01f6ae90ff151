"""Redaction of personal data and secrets, in Chinese and international formats: examples, then a property over
generated values embedded in generated text (the class, not the examples)."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.knowledge.redaction import redact, redact_text

FULLWIDTH = {ord(c): ord(c) + 0xFEE0 for c in "0123456789"}


@pytest.mark.parametrize(("text", "kind"), [
    ("请联系 zhang.san@example.com.cn 确认", "email"),
    ("write to Bob.O'Neil+ops@mail.example.org today", "email"),
    ("手机 138 0013 8000，尽快", "phone"),
    ("电话：+86-139-0013-8000", "phone"),
    ("座机 010-62345678 转 8", "phone"),
    ("call +44 20 7946 0958 after 5", "phone"),
    ("phone (415) 555-2671", "phone"),
    ("全角 " + "13800138000".translate(FULLWIDTH) + " 号码", "phone"),
    ("身份证号码：11010519491231002X", "id_number"),
    ("his SSN is 078-05-1120", "id_number"),
    ("护照号 E12345678", "id_number"),
    ("HKID A123456(7)", "id_number"),
    ("卡号 6222 0212 3456 7890 128 请核对", "card_number"),
    ("visa 4111-1111-1111-1111", "card_number"),
    ("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx0123", "api_key"),
    ("aws AKIAIOSFODNN7EXAMPLE", "api_key"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key"),
    ("Authorization: Bearer abcdef0123456789abcdef", "api_key"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLWhlcmU", "api_key"),
    ("数据库密码：Passw0rd!2026", "api_key"),
    ("client_secret: 9a8B7c6D5e4F", "api_key"),
])
def test_each_format_is_redacted_and_recorded_by_kind(text: str, kind: str) -> None:
    clean, kinds = redact_text(text)
    assert f"[REDACTED:{kind}]" in clean and kind in {k.value for k in kinds}
    digits = re.sub(r"\D", "", text)
    if len(digits) >= 9:
        assert len(re.sub(r"\D", "", clean)) < 5, clean


@pytest.mark.parametrize("text", [
    "v2.3.1 released 2026-12-03; revenue 1200000.50 CNY; order 20261203; 3 retries in 45 s",
    "报告发布前必须获得财务审批（2026 年第 4 季度起）",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "the token budget: 1500 tokens per bundle",
])
def test_dates_amounts_versions_and_digests_stay(text: str) -> None:
    assert redact_text(text) == (unicodedata.normalize("NFKC", text), [])


def test_paths_not_values_are_recorded() -> None:
    body = {"claim": "ask a@b.co", "evidence": [{"quote": "ok"}, {"quote": "call 13800138000"}],
            "structured": {"attempts": [{"action": "token=sk-live-0123456789abcdefXYZ"}]}}
    clean, found = redact(body)
    assert [r.as_json() for r in found] == [
        {"kind": "email", "path": "claim"}, {"kind": "phone", "path": "evidence/1/quote"},
        {"kind": "api_key", "path": "structured/attempts/0/action"}]
    assert "13800138000" not in str(clean) and "a@b.co" not in str(clean) and "sk-live" not in str(clean)


def _luhn_complete(prefix: str) -> str:
    for last in "0123456789":
        number = prefix + last
        total = sum(int(d) if n % 2 == 0 else (int(d) * 2 - 9 if int(d) > 4 else int(d) * 2)
                    for n, d in enumerate(reversed(number)))
        if total % 10 == 0:
            return number
    raise AssertionError


mobile = st.builds(lambda p, r: f"1{p}{r}", st.sampled_from("3456789"), st.from_regex(r"\d{9}", fullmatch=True))
cn_id = st.builds(lambda a, y, m, d, s: f"{a}{y}{m:02d}{d:02d}{s}", st.from_regex(r"[1-6]\d{5}", fullmatch=True),
                  st.integers(1950, 2015), st.integers(1, 12), st.integers(1, 28),
                  st.from_regex(r"\d{3}[0-9X]", fullmatch=True))
card = st.builds(lambda p: _luhn_complete(p), st.from_regex(r"(62|4|5[1-5])\d{13,15}", fullmatch=True))
email = st.from_regex(r"[a-z][a-z0-9._]{1,12}@[a-z]{2,10}\.(com|cn|org|io)", fullmatch=True)
secret = st.from_regex(r"sk-[A-Za-z0-9]{24,40}", fullmatch=True)


def _spaced(value: str, sep: str) -> str:
    return sep.join(value[i:i + 4] for i in range(0, len(value), 4)) if sep else value


filler = st.sampled_from(["请联系", "call", "见工单", "备注：", "ticket says", "值班电话", "the customer's", ""])


@settings(max_examples=200, deadline=None)
@given(st.one_of(mobile, cn_id, card, email, secret), filler, filler, st.sampled_from(["", " ", "-"]),
       st.booleans())
def test_no_generated_value_survives(value: str, before: str, after: str, sep: str, fullwidth: bool) -> None:
    written = _spaced(value, sep) if value.isdigit() or value[:-1].isdigit() else value
    if fullwidth:
        written = written.translate(FULLWIDTH)
    clean, kinds = redact_text(f"{before} {written} {after}")
    assert kinds, written
    core = re.sub(r"[^0-9A-Za-z@]", "", value)
    assert core not in re.sub(r"[^0-9A-Za-z@]", "", clean), clean
