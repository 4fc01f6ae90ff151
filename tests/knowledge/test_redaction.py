"""Redaction of personal data and secrets, in Chinese and international formats: examples, then a property over
generated values embedded in generated text (the class, not the examples)."""

from __future__ import annotations

import base64
import re
import unicodedata
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.knowledge.redaction import Kind, redact, redact_text

FULLWIDTH = {ord(c): ord(c) + 0xFEE0 for c in "0123456789"}
SCRIPTS = [{}, FULLWIDTH, {ord(c): ord(c) - 0x30 + 0x660 for c in "0123456789"},  # ASCII, full-width, Arabic-Indic
           {ord(c): ord(c) - 0x30 + 0x966 for c in "0123456789"}]  # Devanagari


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
    ('{"password": "hunter2hunter2"}', "api_key"),
    ("{'api_key': 'abc123xyz'}", "api_key"),
    ('{"token":"tok_9f8e7d6c5b4a"}', "api_key"),
    ("the password is hunter2hunter2", "api_key"),
    ("Authorization: Basic dXNlcjpwYXNz", "api_key"),
    ("curl -H 'Authorization: Token 0a1b2c3d4e5f'", "api_key"),
    ("AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4+/Zm9vYmFy==;EndpointSuffix=core.windows.net", "api_key"),
    ("https://acct.blob.core.windows.net/c/b?sp=r&sig=abcDEF123%2Bxyz%3D", "api_key"),
    ("aws_secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for prod", "api_key"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----", "api_key"),
    ("手机 138 - 0013 - 8000", "phone"),
    ("手机 138—0013—8000", "phone"),
    ("手机 138–0013–8000", "phone"),
    ("手机 138\u20110013\u20118000", "phone"),
    ("手机 138/0013/8000", "phone"),
    ("手机 138_0013_8000", "phone"),
    ("手机 138\u200b0013\u200d8000\u2060", "phone"),
    ("手机 1\ufeff38 0013  8000", "phone"),
    ("Phone13800138000", "phone"),
    ("tel13800138000", "phone"),
    ("手机号13800138000", "phone"),
    ("ID11010519491231002X", "id_number"),
    ("SSN 123 45 6789", "id_number"),
    ("card 4111 1111 1111 1112 (fails Luhn)", "card_number"),
    ("请发到 a%40b.com", "email"),
    ("请发到 张三@例子.中国", "email"),
    ("write to name (at) example (dot) com", "email"),
    ("write to name[at]example.com", "email"),
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


@pytest.mark.parametrize("text", [
    "due 2026-12-03", "due 2026/12/03", "due 2026年12月3日", "due 03/12/2026 13:00", "at 10:30:45 UTC",
    "revenue 1,200,000.50", "release v2.3.1", "conversion 45.5% up", "ticket A12-7", "order 20261203",
    "digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "request 550e8400-e29b-41d4-a716-446655440000", "the token budget: 1500", "basic settings are fine",
    "postgres://localhost:5432/db", "call 13800138000 on 2026-12-03 at 10:30",
])
def test_what_is_not_personal_keeps_its_digits(text: str) -> None:
    """Each thing that must stay, alone and beside a value that must go: its digits are all still there."""
    clean, _ = redact_text(text)
    kept = re.sub(r"\D", "", clean)
    assert kept == re.sub(r"\D", "", text.replace("13800138000", "")), clean


def test_a_card_grouped_number_goes_whole_whatever_its_checksum() -> None:
    """Grouped 4-4-4-4, it is a card even when Luhn fails: no piece of it is taken for a phone and left behind."""
    for number in ("1380 0138 0001 2345", "4111-1111-1111-1112", "6222 0212 3456 7890 129"):
        clean, kinds = redact_text(f"卡号 {number} 请核对")
        assert clean == "卡号 [REDACTED:card_number] 请核对" and [k.value for k in kinds] == ["card_number"]


def test_a_checksum_joins_groups_only_after_the_shapes_are_taken() -> None:
    """Luhn across groups is weak evidence: it finds a card cut oddly, but never eats a number beside a phone."""
    assert redact_text("card 62000000 00000005 ok") == ("card [REDACTED:card_number] ok", [Kind.CARD_NUMBER])
    assert _luhn_complete("151013800138000"[:-1]) == "151013800138000"  # joined, the two would pass Luhn
    assert redact_text("budget 1510 13800138000") == ("budget 1510 [REDACTED:phone]", [Kind.PHONE])


def test_a_run_is_cut_where_the_cut_takes_most_and_leaves_no_piece() -> None:
    """``1500 1300000`` is a mobile too; taking it would leave ``0000`` of the real one behind."""
    assert redact_text("budget 1500 1300000 0000") == ("budget 1500 [REDACTED:phone]", [Kind.PHONE])


def test_only_the_user_and_password_of_a_url_go() -> None:
    clean, _ = redact_text("dsn postgres://admin:s3cr3t@localhost:5432/db")
    assert clean == "dsn postgres://[REDACTED:api_key]@localhost:5432/db"


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


filler = st.sampled_from(["请联系", "call ", "见工单", "备注：", "ticket says ", "值班电话", "the customer's ", "",
                          "→ ", "客户（VIP）"])
"""Words around a value, with no digit in them (the number oracle counts on that)."""


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _aws_secret(parts: tuple[str, str, str, str]) -> str:
    """40 base64 characters with upper and lower case, digits and ``/`` or ``+``, the shape of an AWS secret."""
    upper, lower, digits, rest = parts
    return (upper + lower + digits + rest)[:40]


word = st.from_regex(r"[a-z]{2,8}[0-9]{1,3}", fullmatch=True)
password = st.from_regex(r"[A-Za-z]{2,8}[0-9][A-Za-z0-9!#*]{3,12}", fullmatch=True)
label = st.sampled_from(["password", "api_key", "token", "secret", "access_token", "client_secret", "AccountKey",
                         "密码", "passwd"])
quote = st.sampled_from(['"', "'", ""])
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
SEPARATORS = ["", " ", "-", " - ", "—", "–", "\u2011", "/", "_", ".", "  ", "\u3000", "\u00a0", "\u200b"]
GLUED = ["", "Phone", "tel", "手机号", "ID", "No.", "#", "卡号"]
QUOTED = ["{}", '"{}"', "'{}'", "「{}」", "（{}）", "<{}>"]


@dataclass(frozen=True)
class Case:
    """A generated value as written in text, what must not be left of it (the oracle), and the kind it is."""
    written: str
    gone: list[str]
    kind: str


def _number(value: str, kind: str, seps: tuple[str, str]) -> Case:
    """A number split in fours (or 3-4-4 for a mobile) with a separator, kept only as its digits by the oracle."""
    sizes = [3, 4, 4] if kind == "phone" else [4] * 5
    parts, at = [], 0
    for size in sizes:
        if at < len(value):
            parts.append(value[at:at + size])
            at += size
    written = "".join(part + (seps[n % 2] if n < len(parts) - 1 else "") for n, part in enumerate(parts))
    return Case(written, [re.sub(r"\D", "", value)], kind)


mobiles = st.builds(lambda v, seps, cc: _number(v, "phone", seps) if not cc else
                    Case(f"+86 {_number(v, 'phone', seps).written}", [v], "phone"),
                    mobile, st.tuples(st.sampled_from(SEPARATORS), st.sampled_from(SEPARATORS)), st.booleans())
ids = st.builds(lambda v, sep: Case(v if not sep else f"{v[:6]}{sep}{v[6:14]}{sep}{v[14:]}", [v[:17]], "id_number"),
                cn_id, st.sampled_from(["", " ", "-", "\u200b"]))
luhn_cards = st.builds(lambda v, sep: _number(v, "card_number", (sep, sep)), card, st.sampled_from(SEPARATORS))
"""Cards as printed: one run, or fours with one kind of separator (a card cut 8-8 or 4-8-4 is not in the class)."""
any_cards = st.builds(lambda v, sep: _number(v, "card_number", (sep, sep)),
                      st.from_regex(r"[1-9][0-9]{15}", fullmatch=True),
                      st.sampled_from([s for s in SEPARATORS if s not in ("", "\u200b")]))
ssns = st.builds(lambda a, g, s, sep: Case(f"{a}{sep}{g}{sep}{s}", [f"{a}{g}{s}"], "id_number"),
                 st.from_regex(r"[1-8][0-9][0-9]", fullmatch=True), st.from_regex(r"[0-9][0-9]", fullmatch=True),
                 st.from_regex(r"[0-9]{4}", fullmatch=True), st.sampled_from([" ", "-", " - ", "—"]))
emails = st.builds(
    lambda local, domain, at_dot: Case(f"{local}{at_dot[0]}{domain}{at_dot[1]}com", [local], "email"),
    word, st.from_regex(r"[a-z]{3,8}", fullmatch=True),
    st.sampled_from([("@", "."), ("%40", "."), (" (at) ", " (dot) "), ("[at]", "."), ("\uff20", "\uff0e")]))
idn_emails = st.builds(lambda local, domain: Case(f"{local}@{domain}.中国", [local], "email"),
                       st.text(st.sampled_from("张三李四王五赵六"), min_size=2, max_size=4),
                       st.text(st.sampled_from("例子公司网络"), min_size=2, max_size=4))
labelled = st.builds(
    lambda lab, q, v, sep: Case(f"{q}{lab}{q}{sep}{q}{v}{q}", [v], "api_key"),
    label, quote, password, st.sampled_from([": ", ":", "=", " = ", " is ", "：", "是"]))
urls = st.builds(lambda scheme, user, pw: Case(f"{scheme}://{user}:{pw}@db.internal:5432/app", [f"{user}:{pw}", pw],
                                               "api_key"),
                 st.sampled_from(["postgres", "postgresql+psycopg", "mysql", "redis", "https", "amqp"]), word, password)
basics = st.builds(lambda user, pw: Case(f"Authorization: Basic {_b64(f'{user}:{pw}')}", [_b64(f"{user}:{pw}")],
                                         "api_key"), word, password)
aws = st.builds(lambda parts: Case(_aws_secret(parts), [_aws_secret(parts)], "api_key"), st.tuples(
    st.from_regex(r"[A-Z]{5,12}", fullmatch=True), st.from_regex(r"[a-z]{5,12}", fullmatch=True),
    st.from_regex(r"[0-9]{3,6}", fullmatch=True), st.from_regex(r"[/+][A-Za-z0-9/+]{39}", fullmatch=True)))
sas = st.builds(lambda sig: Case(f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig={sig}", [sig],
                                 "api_key"),
                st.from_regex(r"[A-Za-z0-9]{20,43}(%2B|%2F)[A-Za-z0-9]{0,8}%3D", fullmatch=True))
keys = st.builds(lambda v: Case(v, [v], "api_key"), secret)

numbers = st.one_of(mobiles, ids, luhn_cards, any_cards, ssns)
texts = st.one_of(emails, idn_emails, labelled, urls, basics, aws, sas, keys)
KEEP = ["", "on 2026-12-03", "2026/12/03", "2026年12月3日", "at 10:30", "v2.3.1", "1,200,000.50 CNY", "45%",
        "token budget: 1500", "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]


def _hide(text: str, where: int, mark: str) -> str:
    """``text`` with an invisible character inside it, which must not protect what it splits."""
    at = where % (len(text) + 1)
    return text[:at] + mark + text[at:]


@settings(max_examples=1000, deadline=None)
@given(numbers, filler, filler, st.sampled_from(KEEP), st.sampled_from(GLUED), st.sampled_from(QUOTED),
       st.sampled_from(SCRIPTS), st.integers(0, 40), st.sampled_from([*ZERO_WIDTH, ""]))
def test_no_generated_number_survives_nor_any_piece_of_it(
    case: Case, before: str, after: str, keep: str, glued: str, quoted: str, script: dict[int, int], where: int,
    mark: str,
) -> None:
    """Oracle: the text around the number carries only the digits of what must stay, so after redaction the text's
    digits are exactly those: any other digit left is a piece of the value, any missing one was over-redacted."""
    written = _hide(case.written, where, mark).translate(script)
    text = f"{keep} {before}{glued}{quoted.format(written)} {after}"
    clean, kinds = redact_text(text)
    assert case.kind in {k.value for k in kinds}, (text, clean)
    assert re.sub(r"\D", "", clean) == re.sub(r"\D", "", unicodedata.normalize("NFKC", keep)), (text, clean)


@settings(max_examples=1000, deadline=None)
@given(texts, filler, filler, st.sampled_from(KEEP), st.sampled_from(QUOTED), st.integers(0, 80),
       st.sampled_from([*ZERO_WIDTH, ""]))
def test_no_generated_address_or_secret_survives(
    case: Case, before: str, after: str, keep: str, quoted: str, where: int, mark: str
) -> None:
    """Oracle: what the generator knows must go (a local part, a password, a key) is nowhere in the result, in any
    case, and what must stay beside it is still there."""
    text = f"{keep} {before} {quoted.format(_hide(case.written, where, mark))} {after}"
    clean, kinds = redact_text(text)
    assert case.kind in {k.value for k in kinds}, (text, clean)
    kept = unicodedata.normalize("NFKC", keep)
    assert kept in clean, (text, clean)
    rest = re.sub(r"\[REDACTED:\w+\]", " ", clean).replace(kept, " ")
    for value in case.gone:
        assert value.lower() not in rest.lower(), (text, clean)
