"""Structured summaries are extractive: a negation, a condition, a time, an uncertainty and an unfinished state
survive because the source sentence is kept whole, and check_faithful catches a summary that lost one."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memory.sessions.messages import MessageRole, Stage, StageMessage
from memory.sessions.summary import (
    ABSTRACT_TOKENS,
    EmptyStageError,
    StructuredSummary,
    SummaryItem,
    TaskObservationError,
    check_faithful,
    split_sentences,
    summarize,
)
from memory.tokens import count_tokens

_AT = datetime(2026, 7, 14, 6, 0, tzinfo=UTC)

DRAFT_ZH = "报告草稿已经生成，但尚未审批，也没有发布。"
DRAFT_EN = "The draft is generated but not approved and not published."


def _msg(seq: int, role: str, content: str, *, context_refs: tuple[str, ...] = ()) -> StageMessage:
    return StageMessage(f"ev-{seq}", seq, MessageRole(role), content, _AT, context_refs=context_refs)


def _stage(*messages: StageMessage) -> Stage:
    return Stage("s-500", messages)


def _texts(items: tuple[SummaryItem, ...]) -> list[str]:
    return [item.text for item in items]


def _section_of(summary: StructuredSummary, text: str) -> list[str]:
    return [name for name, items in summary.sections().items() if text in _texts(items)]


@pytest.mark.parametrize(
    ("request_text", "status", "negations", "claim"),
    [
        ("帮我生成 6 月的销售报告。", DRAFT_ZH, ("尚未审批", "没有发布"), "报告已完成。"),
        ("I want the June sales report.", DRAFT_EN, ("not approved", "not published"), "The report is done."),
    ],
    ids=["zh", "en"],
)
def test_a_generated_but_unapproved_unpublished_draft_never_becomes_a_finished_report(
    request_text: str, status: str, negations: tuple[str, str], claim: str
) -> None:
    stage = _stage(_msg(1, "user", request_text), _msg(2, "assistant", status))
    summary = summarize(stage)
    assert summary.pending == (SummaryItem(status, ("ev-2",)),)
    assert all(status not in item.text for item in summary.completed)
    assert summary.completed == ()
    assert _section_of(summary, status) == ["pending"]
    for negation in negations:
        assert negation in summary.abstract
        assert negation in summary.overview()
    assert check_faithful(summary, stage) == []

    finished = replace(summary, completed=(SummaryItem(claim.rstrip("。."), ("ev-2",)),), abstract=claim)
    problems = check_faithful(finished, stage)
    assert any("is not verbatim in any event it cites" in problem for problem in problems)
    assert any("abstract claims completion" in problem for problem in problems)


@pytest.mark.parametrize(
    ("status", "cut", "lost"),
    [(DRAFT_ZH, "报告草稿已经生成", "尚未"), (DRAFT_EN, "The draft is generated", "not approved")],
    ids=["zh", "en"],
)
def test_an_item_cut_out_of_its_sentence_is_verbatim_yet_unfaithful(status: str, cut: str, lost: str) -> None:
    stage = _stage(_msg(1, "assistant", status))
    summary = summarize(stage)
    cut_summary = replace(summary, pending=(), completed=(SummaryItem(cut, ("ev-1",)),), abstract=cut)
    problems = check_faithful(cut_summary, stage)
    assert problems
    assert all("is not verbatim" not in problem for problem in problems)
    assert any(f"drops the unfinished {lost!r}" in problem for problem in problems)
    assert any("drops the negation" in problem for problem in problems)


def test_a_condition_with_its_time_is_kept_whole() -> None:
    sentence = "如果下周二前没有审批就提醒我。"
    stage = _stage(_msg(1, "user", "报告草稿已经发给财务。" + sentence))
    summary = summarize(stage)
    assert _section_of(summary, sentence) == ["pending"]
    english = "If it is not approved by Tuesday, remind me."
    assert "If it is not approved by Tuesday, remind me." in _texts(summarize(_stage(_msg(1, "user", english))).pending)
    dropped_condition = replace(summary, pending=(SummaryItem("下周二前没有审批就提醒我", ("ev-1",)),))
    assert any("drops the condition '如果'" in problem for problem in check_faithful(dropped_condition, stage))


def test_times_are_kept_and_a_summary_that_drops_one_is_caught() -> None:
    deadline = "周五之前必须提交报告。"
    meeting = "The review with finance is at 3 pm on Friday."
    stage = _stage(_msg(1, "user", deadline + meeting))
    summary = summarize(stage)
    assert _texts(summary.constraints) == [deadline]
    assert _texts(summary.facts) == [meeting]
    undated = replace(summary, facts=(SummaryItem("The review with finance", ("ev-1",)),))
    problems = check_faithful(undated, stage)
    assert any("drops the time 'Friday'" in problem for problem in problems)
    assert any("drops the time '3 pm'" in problem for problem in problems)


def test_uncertainty_goes_to_unknowns_verbatim() -> None:
    stage = _stage(
        _msg(1, "user", "可能是 6 月的数据。Maybe the totals are from May."), _msg(2, "tool", "Source unknown.")
    )
    summary = summarize(stage)
    assert _texts(summary.unknowns) == ["可能是 6 月的数据。", "Maybe the totals are from May.", "Source unknown."]
    sure = replace(summary, unknowns=(SummaryItem("是 6 月的数据", ("ev-1",)),))
    assert any("drops the uncertainty '可能'" in problem for problem in check_faithful(sure, stage))


def test_sentences_land_in_their_sections_by_chinese_and_english_cues() -> None:
    stage = _stage(
        _msg(1, "user", "我的目标是月底前发布 6 月报告。I need to send it to finance."),
        _msg(2, "user", "我们决定就用人民币。不要用表格。Only use plain text, this time."),
        _msg(3, "assistant", "图表已经生成了。The export failed with a timeout. We'll use the EU template."),
        _msg(4, "tool", "导出失败：连接超时。共导出 1200 条销售记录。"),
        _msg(5, "user", "我住在上海，负责华东区的销售。"),
    )
    summary = summarize(stage)
    assert {name: _texts(items) for name, items in summary.sections().items() if items} == {
        "goal": ["我的目标是月底前发布 6 月报告。", "I need to send it to finance."],
        "decisions": ["我们决定就用人民币。", "We'll use the EU template."],
        "constraints": ["不要用表格。", "Only use plain text, this time."],
        "completed": ["图表已经生成了。"],
        "errors": ["The export failed with a timeout.", "导出失败：连接超时。"],
        "facts": ["共导出 1200 条销售记录。", "我住在上海，负责华东区的销售。"],
    }
    assert [item.key for item in summary.constraints] == ["response.output_format", "response.output_format"]
    assert [item.key for item in summary.decisions] == [None, None]
    assert check_faithful(summary, stage) == []


def test_a_response_preference_without_a_constraint_word_is_still_a_constraint() -> None:
    summary = summarize(_stage(_msg(1, "user", "这次用纯文本。")))
    assert summary.constraints == (SummaryItem("这次用纯文本。", ("ev-1",), "response.output_format"),)


def test_assistant_prose_chit_chat_and_questions_are_not_facts() -> None:
    summary = summarize(
        _stage(
            _msg(1, "user", "好的，谢谢！"),
            _msg(2, "assistant", "The quarterly numbers look strong overall."),
            _msg(3, "user", "报告用的是哪个月的数据？"),
        )
    )
    assert all(items == () for items in summary.sections().values())


def test_identical_sentences_are_one_item_citing_every_event() -> None:
    stage = _stage(
        _msg(1, "user", "报告必须用人民币。"),
        _msg(2, "assistant", "收到"),
        _msg(3, "user", "报告必须用人民币。再加一张图。"),
    )
    assert summarize(stage).constraints == (SummaryItem("报告必须用人民币。", ("ev-1", "ev-3")),)


def test_recalled_context_and_system_messages_are_not_summarised() -> None:
    summary = summarize(
        _stage(
            _msg(1, "system", "You must never reveal customer names."),
            _msg(2, "assistant", "上次你说过报告必须用人民币。", context_refs=("memory:42",)),
            _msg(3, "user", "继续写报告的第二部分内容"),
        )
    )
    assert {name: _texts(items) for name, items in summary.sections().items() if items} == {
        "facts": ["继续写报告的第二部分内容"]
    }


def test_every_item_cites_events_inside_the_stage_and_a_foreign_citation_is_caught() -> None:
    stage = _stage(*(_msg(seq, "user", f"第 {seq} 批销售数据已经导入了。") for seq in range(3, 9)))
    summary = summarize(stage)
    assert (summary.from_sequence, summary.to_sequence) == (3, 8)
    cited = {event_id for items in summary.sections().values() for item in items for event_id in item.source_event_ids}
    assert cited == stage.event_ids()
    foreign = replace(summary, completed=(SummaryItem("第 3 批销售数据已经导入了。", ("ev-3", "ev-99")),))
    assert check_faithful(foreign, stage) == [
        "completed item '第 3 批销售数据已经导入了。' cites event ev-99, which is not in the stage"
    ]
    shifted = replace(summary, to_sequence=9)
    assert check_faithful(shifted, stage) == ["summary range 3-9 is not the stage's 3-8"]


def test_a_capped_section_keeps_its_latest_items_up_to_the_limit() -> None:
    stage = _stage(*(_msg(seq, "user", f"第 {seq} 批销售数据已经导入了。") for seq in range(1, 6)))
    summary = summarize(stage, max_items_per_section=2)
    assert _texts(summary.completed) == ["第 4 批销售数据已经导入了。", "第 5 批销售数据已经导入了。"]
    with pytest.raises(ValueError, match="max_items_per_section"):
        summarize(stage, max_items_per_section=0)


@pytest.mark.parametrize(
    ("section", "sentence"),
    [("pending", "第 {n} 项检查还没有做。"), ("unknowns", "第 {n} 项可能要重做。"), ("errors", "第 {n} 项导出失败。"),
     ("constraints", "第 {n} 项必须用人民币。")],
)
def test_unfinished_states_unknowns_errors_and_constraints_are_never_capped(section: str, sentence: str) -> None:
    said = [sentence.format(n=n) for n in range(1, 6)]
    stage = _stage(*(_msg(n, "user", text) for n, text in enumerate(said, start=1)))
    summary = summarize(stage, max_items_per_section=2)
    assert _texts(summary.sections()[section]) == said


def test_a_semicolon_does_not_split_a_completion_from_its_unfinished_state() -> None:
    said = [("user", "报告草稿已经生成；但还没有审批。"), ("user", "The draft is generated; it is not approved.")]
    said += [("user", f"第{n}项检查还没有做。") for n in range(12)]
    stage = _stage(*(_msg(n, role, text) for n, (role, text) in enumerate(said, start=1)))
    summary = summarize(stage)
    assert summary.completed == ()
    assert _texts(summary.pending)[:2] == ["报告草稿已经生成；但还没有审批。", said[1][1]]
    assert check_faithful(summary, stage) == []


def test_a_completion_kept_without_the_unfinished_state_said_beside_it_is_caught() -> None:
    said = "The report is published. But only the draft version, the final one stays private."
    stage = _stage(_msg(1, "assistant", said))
    summary = summarize(stage)
    assert _texts(summary.completed) == ["The report is published."]
    assert _texts(summary.pending) == ["But only the draft version, the final one stays private."]
    assert check_faithful(summary, stage) == []
    assert check_faithful(replace(summary, pending=()), stage) == [
        "completed item 'The report is published.' is shown without "
        "'But only the draft version, the final one stays private.', which event ev-1 says beside it"
    ]


@pytest.mark.parametrize(
    ("role", "question"),
    [("user", "Is the report published?"), ("assistant", "Have you approved the release?"),
     ("assistant", "已经发布了吗？"), ("user", "报告已经审批了吗"), ("user", "Have we decided to use CNY?")],
)
def test_a_question_is_never_a_completion_nor_a_decision(role: str, question: str) -> None:
    stage = _stage(_msg(1, role, question))
    summary = summarize(stage)
    assert _section_of(summary, question) == ["unknowns"]
    assert summary.abstract == question
    assert check_faithful(summary, stage) == []


@pytest.mark.parametrize(
    ("sentence", "section"),
    [
        ("The fix is merged but the tests are failing.", "errors"),
        ("The build is broken after the merge.", "errors"),
        ("Published, though nobody has reviewed it.", "pending"),
        ("发布了，但没人审核过。", "pending"),
        ("The deployment has been completed except for the EU region.", "pending"),
        ("除了欧盟区，其他区域都已经部署了。", "pending"),
        ("Approved, but not by the finance team.", "pending"),
        ("I will deploy it tomorrow if the tests pass.", "pending"),
        ("We are going to ship the report on Friday.", "pending"),
        ("明天如果测试通过就发布。", "pending"),
        ("But only the draft version, the final one stays private.", "pending"),
    ],
)
def test_a_failure_a_limit_a_future_deed_or_a_condition_the_assistant_states_is_never_completed(
    sentence: str, section: str
) -> None:
    summary = summarize(_stage(_msg(1, "assistant", sentence)))
    assert _section_of(summary, sentence) == [section]


def test_the_abstract_is_one_line_of_whole_sentences_within_its_budget() -> None:
    sentences = [f"第 {n} 个待审批的报告还没有发布，需要财务部门和法务部门共同确认。" for n in range(1, 9)]
    stage = _stage(_msg(1, "user", "帮我跟进报告。\n" + "\n".join(sentences)))
    summary = summarize(stage)
    assert "\n" not in summary.abstract
    assert count_tokens(summary.abstract) <= ABSTRACT_TOKENS
    abstract_sentences = split_sentences(summary.abstract)
    assert abstract_sentences[0] == "帮我跟进报告。"
    assert 1 < len(abstract_sentences) < 1 + len(sentences)
    assert set(abstract_sentences) <= {"帮我跟进报告。", *sentences}


def test_a_single_sentence_longer_than_the_budget_is_kept_whole() -> None:
    long = "The draft " + "and the appendix " * 60 + "is not approved yet."
    summary = summarize(_stage(_msg(1, "assistant", long)))
    assert summary.abstract == long


def test_the_abstract_may_state_a_completion_the_stage_states() -> None:
    stage = _stage(_msg(1, "assistant", "The report is done."))
    summary = summarize(stage)
    assert summary.completed == (SummaryItem("The report is done.", ("ev-1",)),)
    assert summary.abstract == "The report is done."
    assert check_faithful(summary, stage) == []


def test_the_task_observation_is_copied_and_readers_are_told_to_re_read_the_task() -> None:
    observation = {"task_id": "task-1001", "status": "WAITING_FOR_APPROVAL", "state_version": 18}
    summary = summarize(_stage(_msg(1, "user", DRAFT_ZH)), task_observation=observation)
    observation["status"] = "PUBLISHED"
    assert summary.task_observation == {"task_id": "task-1001", "status": "WAITING_FOR_APPROVAL", "state_version": 18}
    assert summary.as_json()["task_observation"] == summary.task_observation
    assert "WAITING_FOR_APPROVAL" in summary.overview()
    assert "re-read the task" in summary.overview()
    with pytest.raises(TaskObservationError, match="state_version"):
        summarize(_stage(_msg(1, "user", DRAFT_ZH)), task_observation={"task_id": "t", "status": "RUNNING"})


def test_as_json_names_the_source_range_and_every_section() -> None:
    answer = summarize(_stage(_msg(4, "assistant", DRAFT_EN))).as_json()
    assert answer == {
        "source_range": {"from_sequence": 4, "to_sequence": 4},
        "abstract": DRAFT_EN,
        "goal": [],
        "facts": [],
        "decisions": [],
        "constraints": [],
        "completed": [],
        "pending": [{"text": DRAFT_EN, "source_event_ids": ["ev-4"], "key": None}],
        "unknowns": [],
        "errors": [],
        "task_observation": None,
    }


def test_an_empty_stage_is_refused() -> None:
    with pytest.raises(EmptyStageError):
        summarize(_stage())


def test_sentences_split_on_chinese_and_english_marks_but_not_on_semicolons_nor_inside_numbers() -> None:
    text = "Version 3.5 is out. Really? 好的！数据在 v1.2 里；另一份在这里; see\n“已经发了。”他说"
    assert split_sentences(text) == [
        "Version 3.5 is out.",
        "Really?",
        "好的！",
        "数据在 v1.2 里；另一份在这里; see",
        "“已经发了。”",
        "他说",
    ]
    assert all(sentence in text for sentence in split_sentences(text))
