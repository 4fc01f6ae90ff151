"""Re-probe of issue 23, finding 6: a question the user asks about themselves was stored as their fact — "Do I
live in Paris?" as profile.city Paris, "我住在巴黎吗？" as the city "巴黎吗", "Is it true that I live in Paris?".
Asked is not stated: such a question is refused as not a self-statement, while a statement beside it, and a
question or request to the assistant ("Can you answer in English from now on?"), are unaffected.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.sessions.extraction.base import RejectionReason
from memory.sessions.extraction.gates import GateResult, apply_gates
from memory.sessions.extraction.rules import RulesExtractor
from tests.sessions.stages import stage_of

EN_QUESTIONS = ("Do I live in {city}?", "Did I say I live in {city}?", "Is it true that I live in {city}?",
                "Should I say I live in {city} on the form?", "do I live in {city}?")
ZH_QUESTIONS = ("我住在{city}吗？", "我住在{city}吗", "我是住在{city}么？", "我住在{city}，对吗？")


def _gated(text: str) -> GateResult:
    stage = stage_of(("user", text))
    return apply_gates(stage, RulesExtractor().extract(stage))


@settings(max_examples=50, deadline=None)
@given(lang=st.sampled_from(["en", "zh"]), data=st.data(), statement_first=st.booleans())
def test_a_question_about_oneself_is_never_stored_as_a_fact(lang: str, data: st.DataObject,
                                                            statement_first: bool) -> None:
    if lang == "en":
        city = data.draw(st.sampled_from(("Paris", "Lisbon", "Oslo")))
        question, statement, own = data.draw(st.sampled_from(EN_QUESTIONS)), "I live in Shanghai.", "Shanghai"
    else:
        city = data.draw(st.sampled_from(("巴黎", "广州", "成都")))
        question, statement, own = data.draw(st.sampled_from(ZH_QUESTIONS)), "我住在上海。", "上海"
    asked = question.format(city=city)
    alone = _gated(asked)
    assert not [c for c in alone.admitted if c.key == "profile.city"], (asked, alone.admitted)
    assert {r.reason for r in alone.rejections} <= {RejectionReason.NOT_SELF_STATEMENT}
    text = f"{statement} {asked}" if statement_first else f"{asked} {statement}"
    if not asked.endswith(("?", "？")) and not statement_first:
        return  # "我住在巴黎吗 我住在上海。" is one sentence: nothing stated apart from the question
    both = _gated(text)
    assert [c.value for c in both.admitted if c.key == "profile.city"] == [own], (text, both.admitted)


@pytest.mark.parametrize(("text", "key"), [
    ("Can you answer in English from now on?", "response.language"),
    ("以后请用英文回答，好吗？", "response.language"),
    ("我住在上海，你知道吗？", "profile.city"),
])
def test_a_question_to_the_assistant_is_not_one_about_the_user(text: str, key: str) -> None:
    assert [c.key for c in _gated(text).admitted] == [key]
