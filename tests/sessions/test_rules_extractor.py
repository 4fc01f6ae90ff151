"""The rules extractor: what it proposes from which messages, with which category, key, level and evidence."""

from __future__ import annotations

import pytest

from memory.enums import Category, SourceLevel
from memory.sessions.extraction.base import Candidate
from memory.sessions.extraction.rules import RulesExtractor, is_remember_request, strip_remember_request
from memory.sessions.extraction.sentences import all_clauses, sentences
from tests.sessions.stages import stage_of


def _extract(*said: tuple[str, str]) -> list[Candidate]:
    return list(RulesExtractor().extract(stage_of(*said)).candidates)


def _only(text: str) -> Candidate:
    [candidate] = _extract(("user", text))
    return candidate


@pytest.mark.parametrize(
    ("text", "category", "key"),
    [
        ("请记住我对花生过敏。", Category.PROFILE, None),
        ("帮我记一下：以后都用英文回答。", Category.PREFERENCE, "response.language"),
        ("Please remember that I'm a data engineer.", Category.PROFILE, "profile.occupation"),
        ("Don't forget: the contract is with Northwind.", Category.ENTITY, None),
    ],
)
def test_an_explicit_remember_request_is_e1(text: str, category: Category, key: str | None) -> None:
    candidate = _only(text)
    assert candidate.source_level is SourceLevel.E1
    assert (candidate.category, candidate.key) == (category, key)


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("我女儿的生日是5月3日，请记住。", "我女儿的生日是5月3日"),
        ("我对花生过敏，帮我记住。", "我对花生过敏"),
        ("The meeting room code is 4471, remember that.", "The meeting room code is 4471"),
        ("请记住我对花生过敏。", "我对花生过敏"),
        ("请记住，我对花生过敏。", "我对花生过敏"),
        ("帮我记一下：以后都用英文回答。", "以后都用英文回答"),
        ("别忘了我下周一去北京出差。", "我下周一去北京出差"),
        ("Remember that I'm allergic to peanuts.", "I'm allergic to peanuts"),
        ("Please remember: my flight is at 9 am on Monday.", "My flight is at 9 am on Monday"),
        ("Could you remember that I'm a data engineer?", "I'm a data engineer"),
        ("Don't forget: the contract is with Northwind.", "The contract is with Northwind"),
    ],
)
def test_a_memory_keeps_the_fact_not_the_request_to_remember_it(text: str, content: str) -> None:
    candidate = _only(text)
    assert (candidate.content, candidate.source_level) == (content, SourceLevel.E1)
    assert not is_remember_request(candidate.abstract)


@pytest.mark.parametrize("text", ["请记住。", "记住了", "Remember to buy milk.", "I remember that trip fondly."])
def test_text_that_is_no_request_around_a_fact_is_kept_as_it_is(text: str) -> None:
    assert strip_remember_request(text) == text


@pytest.mark.parametrize("text", ["我记住了，谢谢。", "I remember that trip fondly."])
def test_remembering_is_not_a_request_to_remember(text: str) -> None:
    assert not is_remember_request(text)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("以后都用英文回答。", "response.language", "en"),
        ("我更喜欢简短的回答。", "response.verbosity", "brief"),
        ("默认用表格给我结果。", "response.output_format", "table"),
        ("From now on, answer in English.", "response.language", "en"),
        ("I prefer concise answers.", "response.verbosity", "brief"),
        ("我喜欢喝咖啡，尤其是拿铁。", None, None),
    ],
)
def test_a_first_person_preference_is_e2_with_its_response_slot(text: str, key: str | None, value: str | None) -> None:
    candidate = _only(text)
    assert (candidate.category, candidate.source_level) == (Category.PREFERENCE, SourceLevel.E2)
    assert (candidate.key, candidate.value) == (key, value)


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("我不吃辣。", "我不吃辣"),
        ("不要给我用 markdown 表格。", "不要给我用 markdown 表格"),
        ("别再推荐火锅了！", "别再推荐火锅了"),
        ("I don't like tables.", "I don't like tables"),
        ("Please don't use emojis.", "Please don't use emojis"),
    ],
)
def test_a_negated_preference_keeps_its_negation_and_claims_no_slot(text: str, content: str) -> None:
    candidate = _only(text)
    assert candidate.category is Category.PREFERENCE and candidate.source_level is SourceLevel.E2
    assert candidate.content == content
    assert candidate.key is None and candidate.value is None
    assert "(negated)" in candidate.overview.splitlines()[0]


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("我住在上海。", "profile.city", "上海"),
        ("我在阿里巴巴工作。", "profile.employer", "阿里巴巴"),
        ("我是一名医生。", "profile.occupation", "医生"),
        ("我叫张三。", "profile.name", "张三"),
        ("我的名字是李四。", "profile.name", "李四"),
        ("I live in Berlin.", "profile.city", "Berlin"),
        ("I work at Acme Corp.", "profile.employer", "Acme Corp"),
        ("I'm a data engineer.", "profile.occupation", "data engineer"),
        ("My name is Ana Lima.", "profile.name", "Ana Lima"),
    ],
)
def test_a_profile_fact_takes_its_profile_key(text: str, key: str, value: str) -> None:
    candidate = _only(text)
    assert (candidate.category, candidate.source_level, candidate.key, candidate.value) == (
        Category.PROFILE, SourceLevel.E2, key, value
    )
    assert not candidate.correction


@pytest.mark.parametrize(
    ("before", "after", "value"),
    [
        ("我住在上海。", "其实我已经搬到杭州了。", "杭州"),
        ("I live in Berlin.", "Actually, I moved to Lisbon.", "Lisbon"),
        ("我在阿里巴巴工作。", "更正：我在腾讯工作。", "腾讯"),
    ],
)
def test_a_correction_has_the_corrected_facts_category_and_key(before: str, after: str, value: str) -> None:
    old, new = _extract(("user", before), ("user", after))
    assert (new.category, new.key) == (old.category, old.key)
    assert new.value == value and new.correction and not old.correction
    assert new.evidence_event_ids == ("e2",)
    assert "correction" in new.overview


@pytest.mark.parametrize("text", ["不对，是另一个。", "其实还好。", "Actually, never mind.", "好的，谢谢！"])
def test_a_correction_or_chat_stating_nothing_proposes_nothing(text: str) -> None:
    assert _extract(("user", text)) == []


@pytest.mark.parametrize(
    "text", ["下周二去北京出差。", "我明天下午面试。", "I'm flying to Berlin on Friday.", "I have a meeting today."]
)
def test_a_dated_event_of_the_user_is_an_event(text: str) -> None:
    candidate = _only(text)
    assert (candidate.category, candidate.source_level, candidate.key) == (Category.EVENT, SourceLevel.E2, None)


@pytest.mark.parametrize("text", ["他下周二去北京出差。", "我们聊聊北京吧。", "Berlin is lovely in spring."])
def test_others_trips_and_undated_chat_are_no_event(text: str) -> None:
    assert _extract(("user", text)) == []


@pytest.mark.parametrize(
    ("text", "category", "key"),
    [
        ("看起来你更喜欢简短的回答。", Category.PREFERENCE, "response.verbosity"),
        ("You seem to prefer answers in English.", Category.PREFERENCE, "response.language"),
        ("你似乎住在上海。", Category.PROFILE, None),
    ],
)
@pytest.mark.parametrize("role", ["assistant", "tool"])
def test_what_the_assistant_or_a_tool_says_about_the_user_is_e4(
    role: str, text: str, category: Category, key: str | None
) -> None:
    [candidate] = _extract((role, text))
    assert (candidate.category, candidate.key, candidate.source_level) == (category, key, SourceLevel.E4)


def test_the_assistants_own_preferences_and_system_text_yield_nothing() -> None:
    said = [("assistant", "我喜欢这个问题。I prefer to answer briefly."), ("system", "I prefer English. 我住在上海。")]
    assert _extract(*said) == []


def test_recalled_context_is_never_extracted_again() -> None:
    stage = stage_of(
        ("user", "我住在上海。以后都用英文回答。", ("memory:7f0c",)),
        ("assistant", "你似乎住在上海。", ("memory:7f0c",)),
    )
    assert RulesExtractor().extract(stage).candidates == ()


def test_each_candidate_cites_exactly_its_own_message_and_quotes_it_verbatim() -> None:
    said = [
        ("user", "好的，我住在上海，我喜欢喝咖啡，尤其是拿铁。"),
        ("assistant", "明白了。看起来你更喜欢简短的回答。"),
        ("user", "Version 3.5 is fine. I prefer short answers, and I work at Acme Corp!"),
    ]
    stage = stage_of(*said)
    candidates = RulesExtractor().extract(stage).candidates
    by_id = {m.event_id: m.content for m in stage.messages}
    assert [c.content for c in candidates] == [
        "我住在上海",
        "我喜欢喝咖啡，尤其是拿铁",
        "看起来你更喜欢简短的回答",
        "I prefer short answers",
        "and I work at Acme Corp",
    ]
    assert [c.evidence_event_ids for c in candidates] == [("e1",), ("e1",), ("e2",), ("e3",), ("e3",)]
    assert all(c.content in by_id[c.evidence_event_ids[0]] for c in candidates)


def test_the_three_levels() -> None:
    [candidate] = _extract(("user", "以后都用英文回答。"))
    assert candidate.abstract == "response.language = en: 以后都用英文回答" and "\n" not in candidate.abstract
    assert candidate.overview.splitlines() == [
        "PREFERENCE response.language = en", "source: user, 2026-06-01T09:01:00+00:00"
    ]
    assert candidate.content == "以后都用英文回答"


def test_a_long_statement_has_a_one_line_abstract_and_its_full_content() -> None:
    text = "我喜欢" + "很长的" * 120 + "\n说明"
    [candidate] = _extract(("user", text))
    assert len(candidate.abstract) == 200 and candidate.abstract.endswith("…") and "\n" not in candidate.abstract
    assert candidate.content == text.split("\n")[0]


def test_the_same_stage_always_yields_the_same_extraction() -> None:
    stage = stage_of(
        ("user", "记住：我住在上海，我不吃辣。I'm flying to Berlin on Friday."), ("assistant", "You seem impatient.")
    )
    assert RulesExtractor().extract(stage) == RulesExtractor().extract(stage)
    assert RulesExtractor().extract(stage).extractor == "rules"


def test_sentences_split_on_cjk_and_latin_marks_but_not_inside_numbers() -> None:
    text = "我住在上海。你呢？Version 3.5 is out! Really?? 好；行\n下一行"
    expected = ["我住在上海", "你呢", "Version 3.5 is out", "Really", "好", "行", "下一行"]
    assert [s.text for s in sentences(text)] == expected
    assert all(text[s.start : s.end] == s.text for s in sentences(text))


def test_clauses_split_on_cjk_commas_and_on_latin_commas_before_a_space() -> None:
    text = "我住在上海，喜欢咖啡、茶。Tea, coffee,or 1,000 cups"
    assert [c.text for c in all_clauses(text)] == ["我住在上海", "喜欢咖啡", "茶", "Tea", "coffee,or 1,000 cups"]
