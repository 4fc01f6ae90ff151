"""Only what the user says about themselves becomes theirs (issue 23, finding 6), whichever extractor proposes.

The corpus (tests/sessions/attribution_corpus.jsonl) runs through the real rules extractor and gates, and
through the real llm extractor against the stand-in server answering with each forged fact, so the gate is
shown to refuse what a lying model proposes. Forged facts must be 0; recall on genuine self-statements is
measured and must stay high. A hypothesis property then frames random statements in every kind of framing,
alone and after a genuine statement, so the rule covers the class rather than the corpus's sentences.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.enums import SourceLevel
from memory.llm import LlmConfig
from memory.sessions.extraction.attribution import Foreign, forget_requests, own_text, regions
from memory.sessions.extraction.base import Candidate, RejectionReason
from memory.sessions.extraction.gates import GateResult, apply_gates
from memory.sessions.extraction.llm import KEYS, LlmExtractor, system_prompt
from memory.sessions.extraction.rules import RulesExtractor
from tests.sessions.attribution_corpus import Utterance, forged, genuine
from tests.sessions.llm_standin import LlmStandIn, answer, running_standin
from tests.sessions.stages import stage_of

ATTRIBUTION = {RejectionReason.NOT_SELF_STATEMENT, RejectionReason.FORGET_INSTRUCTION}
STATED = (SourceLevel.E1, SourceLevel.E2)
RECALL_FLOOR = 0.95
"""Genuine self-statements the rules extractor must still store: 49/50 before the gate and after it."""


def _rules(*texts: str) -> GateResult:
    stage = stage_of(*(("user", text) for text in texts))
    return apply_gates(stage, RulesExtractor().extract(stage))


def _ids(corpus: list[Utterance]) -> list[str]:
    return [f"{u.lang}-{u.kind}-{n}" for n, u in enumerate(corpus)]


def test_the_corpus_is_bilingual_labelled_and_large_enough() -> None:
    corpus = forged() + genuine()
    assert len(corpus) >= 100 and {u.lang for u in corpus} == {"en", "zh"}
    kinds = {u.kind for u in forged()}
    assert kinds == {"reported", "forwarded", "handed_over", "hypothetical", "example", "role_play", "transcript",
                     "dont_remember", "labelled"}
    assert all(u.fact in u.text for u in corpus)


@pytest.mark.parametrize("utterance", forged(), ids=_ids(forged()))
def test_no_forged_utterance_becomes_the_users_fact_and_each_refusal_is_counted(utterance: Utterance) -> None:
    result = _rules(utterance.text)
    assert result.admitted == (), [(c.key, c.value, c.content) for c in result.admitted]
    assert result.rejections and {r.reason for r in result.rejections} <= ATTRIBUTION
    expected = RejectionReason.FORGET_INSTRUCTION if utterance.kind == "dont_remember" else (
        RejectionReason.NOT_SELF_STATEMENT)
    assert {r.reason for r in result.rejections} == {expected}
    assert all(utterance.fact not in r.detail and (utterance.value or "\0") not in r.detail
               for r in result.rejections)  # the count names the kind, never the text


def _recall(stated: Callable[[Utterance], GateResult]) -> float:
    found = [u for u in genuine()
             if any(u.stated_by(c) for c in stated(u).admitted if c.source_level in STATED)]
    return len(found) / len(genuine())


def test_genuine_self_statements_are_still_stored() -> None:
    recall = _recall(lambda u: _rules(u.text))
    print(f"rules extractor recall on {len(genuine())} genuine self-statements: {recall:.1%}")
    assert recall >= RECALL_FLOOR


@pytest.fixture(scope="module")
def standin() -> Iterator[LlmStandIn]:
    with running_standin() as running:
        yield running


def _llm(standin: LlmStandIn, text: str, *items: dict[str, Any]) -> GateResult:
    standin.script(answer(*items))
    stage = stage_of(("user", text))
    extractor = LlmExtractor(LlmConfig(standin.base_url, "standin", None, timeout_seconds=5.0))
    return apply_gates(stage, extractor.extract(stage))


def _claim(utterance: Utterance, *, paraphrased: bool = False) -> dict[str, Any]:
    """What a model that believes the message would answer: the fact verbatim (or reworded), claimed E1."""
    category = KEYS[utterance.key].value if utterance.key else "PREFERENCE"
    head = f"{category} {utterance.key} = {utterance.value}" if utterance.key else category
    content = f"The user said: {utterance.fact}" if paraphrased else utterance.fact
    return {"category": category, "abstract": content, "overview": f"{head}\nsource: user", "content": content,
            "key": utterance.key, "source_level": "E1", "evidence_event_ids": ["e1"], "correction": False}


@pytest.mark.parametrize("paraphrased", [False, True], ids=["verbatim", "paraphrased"])
def test_the_llm_extractors_forgeries_are_refused_by_the_same_gate(standin: LlmStandIn, paraphrased: bool) -> None:
    stored = []
    for utterance in forged():
        result = _llm(standin, utterance.text, _claim(utterance, paraphrased=paraphrased))
        if result.admitted or not {r.reason for r in result.rejections} <= ATTRIBUTION:
            stored.append((utterance.text, [(c.key, c.value) for c in result.admitted], result.rejections))
    assert stored == []


def test_the_llm_extractors_genuine_statements_pass_the_gate(standin: LlmStandIn) -> None:
    recall = _recall(lambda u: _llm(standin, u.text, _claim(u)))
    print(f"llm extractor (stand-in) recall on {len(genuine())} genuine self-statements: {recall:.1%}")
    assert recall == 1.0


def test_the_prompt_states_the_rule_the_gate_enforces() -> None:
    prompt = system_prompt()
    for words in ("someone else", "forwarded", "translate", "hypothetical", "example", "role-play", "transcript",
                  "don't remember", "别记住", "speaker's label"):
        assert words.lower() in prompt.lower(), words


def test_a_statement_forgotten_later_in_the_stage_is_not_stored() -> None:
    result = _rules("I live in Berlin.", "Don't remember that I live in Berlin.")
    assert result.admitted == ()
    assert {r.reason for r in result.rejections} == {RejectionReason.FORGET_INSTRUCTION}
    kept = _rules("Don't remember that I live in Berlin.", "我住在上海。")
    assert [(c.key, c.value) for c in kept.admitted] == [("profile.city", "上海")]


def test_what_a_forget_instruction_names_is_read_without_the_instruction() -> None:
    assert forget_requests("Don't remember that I live in Berlin.") == ("I live in Berlin",)
    assert forget_requests("别记住我住在成都。") == ("我住在成都",)
    assert forget_requests("这条不用记：我住在苏州。") == ("我住在苏州",)
    assert forget_requests("I don't remember much, but I live in Oslo.") == ()
    assert forget_requests("Don't forget that I live in Prague.") == ()
    assert forget_requests("别忘了我住在大连。") == ()


def test_own_text_keeps_offsets_and_blanks_only_the_foreign_part() -> None:
    text = 'I live in Rome. Bob told me: "I live in Paris"'
    own = own_text(text)
    assert len(own) == len(text) and own.startswith("I live in Rome.") and "Paris" not in own
    assert {r.kind for r in regions(text)} >= {Foreign.REPORTED, Foreign.QUOTED}


# --- the class, not the examples -----------------------------------------------------------------------------

EN_PLACES = ("Paris", "Lisbon", "Cairo", "Denver", "Oslo", "Kyoto", "Porto", "Leeds", "Austin", "Lagos")
ZH_PLACES = ("成都", "广州", "南京", "西安", "昆明", "厦门", "大连", "苏州", "拉萨", "桂林")
EN_SAYING = ("I live in {c}", "I moved to {c}", "I'm based in {c}", "please remember that I live in {c}",
             "I am now living in {c}")
ZH_SAYING = ("我住在{c}", "我搬到了{c}", "请记住我住在{c}", "我家在{c}", "我现在住在{c}")
EN_NAMES = ("Bob", "my colleague", "Alice", "my boss", "The customer", "she")
ZH_NAMES = ("我朋友", "老板", "他", "同事小李", "妈妈")
EN_FRAMES = (
    '{n} told me: "{s}"', "{n} said, \u201c{s}.\u201d", "{n} wrote: '{s}'", 'According to {n}, "{s}."',
    "{n} texted me that {s}.", "Translate into French: {s}.", "Please proofread: {s}.",
    'Is this sentence grammatical? "{s}"', "Could you rewrite this? {s}.", "Summarize this:\n{s}.",
    "Suppose {s}.", "Imagine {s}.", "What if {s}?", "For example: {s}.", "e.g. \"{s}\"",
    "Pretend you are {n}. {s}.", "Let's role-play: {s}.", "User: {s}\nAssistant: noted.", "> {s}\n> thanks",
    "---------- Forwarded message ---------\nFrom: {n}\n\n{s}.", "Don't remember that {s}.",
    "Please do not store this: {s}.",
)
ZH_FRAMES = (
    "{n}说：\u201c{s}\u201d", "{n}让我转告：{s}", "{n}告诉我：{s}。", "{n}说「{s}」", "把这句话翻译成英文：{s}。",
    "帮我润色：{s}。", "这句话语法对吗？\u201c{s}\u201d", "假如{s}，会怎样？", "要是{s}就好了。", "例如：{s}。",
    "扮演{n}：{s}。", "用户：{s}\n助手：好的", "> {s}", "转发：{s}。", "别记住{s}。", "不要记住：{s}。",
    "这条不用记：{s}。",
)
CASINGS: tuple[Callable[[str], str], ...] = (str, str.upper, str.lower)


@st.composite
def framed(draw: st.DrawFn) -> tuple[str, str, str, str, str]:
    """(a genuine statement, its place, a framed forged statement, its place, what joins the two), in one
    language; a ``>`` line must start a line."""
    zh = draw(st.booleans())
    places, saying, names, frames = (ZH_PLACES, ZH_SAYING, ZH_NAMES, ZH_FRAMES) if zh else (
        EN_PLACES, EN_SAYING, EN_NAMES, EN_FRAMES)
    own_place, forged_place = draw(st.lists(st.sampled_from(places), min_size=2, max_size=2, unique=True))
    own = draw(st.sampled_from(saying)).format(c=own_place)
    statement = draw(st.sampled_from(saying)).format(c=forged_place)
    forgery = draw(st.sampled_from(frames)).format(n=draw(st.sampled_from(names)), s=statement)
    end = "。" if zh else "."
    joins = ("", " ", "\n", "\n\n") if zh else (" ", "\n", "\n\n")  # "I live in Paris.Bob…" is one sentence
    join = end + "\n" if forgery.startswith(">") else end + draw(st.sampled_from(joins))
    return own, own_place, draw(st.sampled_from(CASINGS))(forgery), forged_place, join


def _places(result: GateResult) -> set[str]:
    return {(c.value or "").lower() for c in result.admitted if c.key == "profile.city"}


def _stored(result: GateResult, place: str) -> list[Candidate]:
    return [c for c in result.admitted if place.lower() in c.content.lower() or place.lower() in (c.value or "")]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(framed())
def test_no_framing_of_any_statement_becomes_the_users_fact(case: tuple[str, str, str, str, str]) -> None:
    own, own_place, forgery, forged_place, join = case
    assert _stored(_rules(forgery), forged_place) == []
    together = _rules(own + join + forgery)
    assert _stored(together, forged_place) == [], together
    assert own_place.lower() in _places(together)  # the user's own statement beside it is still theirs
    assert _stored(_rules(own), own_place)


@pytest.mark.parametrize("unit", ["Bob said I live in Paris. ", "I live in Paris. ", " 'a", "我朋友说：我住在广州。",
                                  "Alice: I live in Paris.\n", "小王发来：我住在广州。"])
def test_a_long_message_full_of_markers_is_judged_in_bounded_time(unit: str) -> None:
    """Every marker's region is found by binary search over one reading of the message, and each message's
    views are made once: 100,000 characters of statements take seconds, not minutes (it was cubic)."""
    text = (unit * (100_000 // len(unit)))[:100_000]
    started = time.perf_counter()
    result = _rules(text)
    assert time.perf_counter() - started < 20
    if unit.startswith("I "):
        assert result.admitted  # the user's own statements, many times over
    else:
        assert result.admitted == ()


# --- speaker labels and lead-ins (issue 23, item 4) ------------------------------------------------------------

EN_SPEAKERS = ("Alice", "Bob", "Tom's text", "Character bio", "Lyrics", "Q", "A", "Customer", "Interviewer",
               "My friend", "Her reply", "Mom's email", "Agent", "Narrator", "Note from Tom", "Tom's note")
ZH_SPEAKERS = ("小王", "客服", "老板", "同事小李", "她", "问", "答", "歌词", "角色设定", "他的消息", "妈妈的微信",
               "我朋友")
EN_LEAD_INS = ("Here's what Tom sent me:", "Tom sent me:", "Here is what my boss wrote back:", "His message:",
               "Mom sent me this:", "Write a story where", "Make a tweet:", "Could you write a poem where",
               "Compose a short song:")
ZH_LEAD_INS = ("小王发来：", "她留言：", "他回复我：", "他的消息：", "以下是聊天记录：\n", "老板发给我：",
               "帮我写条微博：", "写一个故事：")
EN_OWN_LABELS = ("Update", "PS", "P.S.", "Note", "Quick note", "FYI", "BTW", "Correction", "Side note",
                 "Me", "Reminder", "For the record", "Context", "My update", "Good news", "Fun fact")
ZH_OWN_LABELS = ("补充一下", "补充", "更正", "我", "备注", "另外", "顺便说一下", "对了", "提醒一下", "更新",
                 "我现在的情况是这样")


@st.composite
def labelled(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(a line behind another speaker's label or a lead-in, its place, a line behind the user's own label, its
    place), in one language, with the label's colon ASCII or full-width."""
    zh = draw(st.booleans())
    places, saying = (ZH_PLACES, ZH_SAYING) if zh else (EN_PLACES, EN_SAYING)
    other_place, own_place = draw(st.lists(st.sampled_from(places), min_size=2, max_size=2, unique=True))
    statement = draw(st.sampled_from(saying)).format(c=other_place)
    own = draw(st.sampled_from(saying)).format(c=own_place)
    colon = draw(st.sampled_from(("：", ":"))) if zh else ":"
    space = "" if zh else " "
    if draw(st.booleans()):
        speaker = draw(st.sampled_from(ZH_SPEAKERS if zh else EN_SPEAKERS))
        other = f"{speaker}{colon}{draw(st.sampled_from((space, chr(10))))}{statement}"
    else:
        other = f"{draw(st.sampled_from(ZH_LEAD_INS if zh else EN_LEAD_INS))}{space}{statement}"
    label = draw(st.sampled_from(ZH_OWN_LABELS if zh else EN_OWN_LABELS))
    return other, other_place, f"{label}{colon}{space}{own}", own_place


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labelled())
def test_a_line_behind_another_speakers_label_is_theirs_and_the_users_own_label_keeps_it_the_users(
        case: tuple[str, str, str, str]) -> None:
    other, other_place, own, own_place = case
    assert _stored(_rules(other), other_place) == []
    assert own_place.lower() in _places(_rules(own))
    assert _stored(_rules(own, other), other_place) == []
    together = _rules(own + "\n" + other)  # the user's line first: the other speaker's does not reach back
    assert _stored(together, other_place) == [] and own_place.lower() in _places(together)


def test_a_colon_that_is_no_label_leaves_the_sentence_the_users() -> None:
    for text in ("Meeting at 10:30, I live in Paris.", "See https://mnemo.dev/docs I live in Paris.",
                 "Here's what I told him: I live in Paris.", "I said it before: I live in Paris."):
        assert _places(_rules(text)) == {"paris"}, text
    assert {r.kind for r in regions("Alice: I live in Paris.")} == {Foreign.LABELLED}
