"""The context window: a token budget filled by priority then recency, tool exchanges whole, big results digested."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memory.enums import Category
from memory.sessions.messages import MessageRole, StageMessage, ToolCall
from memory.sessions.state import SessionState, derive_state
from memory.sessions.window import (
    CUT_MARK,
    DIGEST_MAX_CHARS,
    DIGEST_TOKENS,
    ProfileEntry,
    UnpairedToolResultError,
    Window,
    build_window,
)
from memory.tokens import MESSAGE_OVERHEAD, count_tokens

_AT = datetime(2026, 7, 14, 6, 0, tzinfo=UTC)


def _msg(seq: int, role: str, content: str, *, calls: tuple[str, ...] = (), answers: str | None = None) -> StageMessage:
    tool_calls = tuple(ToolCall(call_id, "query_sales", '{"month": "2026-06"}') for call_id in calls)
    return StageMessage(f"ev-{seq}", seq, MessageRole(role), content, _AT, tool_calls=tool_calls, tool_call_id=answers)


def _window(messages: tuple[StageMessage, ...], budget: int, *, large_tool_result_tokens: int = 400) -> Window:
    state = derive_state(messages)
    return build_window(messages, budget_tokens=budget, state=state, large_tool_result_tokens=large_tool_result_tokens)


def _priorities(window: Window) -> dict[int, str]:
    return {m.message.sequence_no: m.priority.value for m in window.messages}


def _profile_entry(memory_id: str, content: str, captured_hour: int) -> ProfileEntry:
    return ProfileEntry(
        memory_id=memory_id,
        version=1,
        category=Category.PREFERENCE,
        key="response.language",
        content=content,
        source_id=f"src-{memory_id}",
        captured_at=datetime(2026, 7, 1, captured_hour, tzinfo=UTC),
    )


_CONVERSATION = (
    _msg(1, "system", "Never reveal customer names."),
    _msg(2, "user", "你好"),
    _msg(3, "user", "我们聊一下团建的地点"),
    _msg(4, "assistant", "杭州或者苏州都可以"),
    _msg(5, "user", "We decided to use CNY for all reports."),
    _msg(6, "user", "上个季度的销售报告放在哪里"),
    _msg(7, "assistant", "在共享盘的 finance 目录"),
    _msg(8, "user", "上个季度的销售报告放在哪里"),
    _msg(9, "user", "其实是这个季度"),
    _msg(10, "assistant", "", calls=("c1",)),
    _msg(11, "tool", "季度销售额 1200 万", answers="c1"),
    _msg(12, "assistant", "我来改一下格式"),
    _msg(13, "user", "把销售报告改成纯文本"),
    _msg(14, "assistant", "要包含图表吗？"),
)


def test_each_message_gets_the_priority_of_its_kind() -> None:
    window = _window(_CONVERSATION, 10_000)
    assert _priorities(window) == {
        1: "P0",  # system: safety rules
        2: "P3",  # chit-chat
        3: "P3",  # an old topic: shares no search term with the current request
        4: "P3",
        5: "P2",  # a decision
        6: "P2",  # older, but about the current request (销售报告)
        7: "P3",  # older and about something else
        8: "P3",  # a repeat of 6
        9: "P1",  # a user correction
        10: "P1",  # the recent tool exchange
        11: "P1",
        12: "P2",  # a recent turn (from the third-last user message on), whatever its topic
        13: "P0",  # the current request
        14: "P0",  # the pending question
    }
    assert window.dropped == ()


def test_the_answer_is_in_sequence_order_and_counts_every_token_it_holds() -> None:
    window = _window(_CONVERSATION, 10_000)
    answer = window.as_json()
    assert [m["sequence_no"] for m in answer["messages"]] == list(range(1, 15))
    assert answer["tokens"] == sum(m["tokens"] for m in answer["messages"]) + answer["state_tokens"]
    assert answer["budget_tokens"] == 10_000
    assert answer["state"] == {}  # the correction and the pending question are in the window: not repeated
    assert answer["messages"][0] == {
        "event_id": "ev-1",
        "sequence_no": 1,
        "role": "system",
        "content": "Never reveal customer names.",
        "priority": "P0",
        "tokens": count_tokens("Never reveal customer names."),
    }
    call, result = answer["messages"][9], answer["messages"][10]
    assert call["tool_calls"] == [{"id": "c1", "name": "query_sales", "arguments": '{"month": "2026-06"}'}]
    assert call["tokens"] == count_tokens("") + count_tokens('query_sales {"month": "2026-06"}')
    assert result["tool_call_id"] == "c1"


def test_the_task_state_is_a_counted_section_and_an_empty_one_costs_nothing() -> None:
    with_state = _window((_msg(1, "user", "继续 task-1001 的 2026-06 报告，这次用纯文本"),), 1_000)
    section = (
        '{"active_entities":{"month":"2026-06","task_id":"task-1001"},"active_task_id":"task-1001",'
        '"temporary_constraints":{"response.output_format":"plain_text"}}'
    )
    assert with_state.state_tokens == count_tokens(section)
    assert with_state.tokens == with_state.messages[0].tokens + with_state.state_tokens
    assert _window((_msg(1, "user", "hello there"),), 1_000).state_tokens == 0


def test_a_tight_budget_keeps_by_priority_then_newest_first() -> None:
    p0_and_p1 = sum(count_tokens(m.content) for m in _CONVERSATION if m.sequence_no in (1, 9, 11, 13, 14))
    p0_and_p1 += count_tokens("") + count_tokens('query_sales {"month": "2026-06"}')
    state_tokens = _window(_CONVERSATION, 10_000).state_tokens
    newest_p2 = count_tokens(_CONVERSATION[11].content)
    window = _window(_CONVERSATION, p0_and_p1 + state_tokens + newest_p2)
    assert sorted(_priorities(window)) == [1, 9, 10, 11, 12, 13, 14]
    assert window.tokens == p0_and_p1 + state_tokens + newest_p2
    assert {(d.sequence_no, d.priority.value, d.reason.value) for d in window.dropped} == {
        (2, "P3", "over_budget"),
        (3, "P3", "over_budget"),
        (4, "P3", "over_budget"),
        (5, "P2", "over_budget"),
        (6, "P2", "over_budget"),
        (7, "P3", "over_budget"),
        (8, "P3", "over_budget"),
    }


def test_a_budget_below_the_current_request_returns_what_fits_and_lists_the_rest() -> None:
    messages = (_msg(1, "user", "请把 2026 年 6 月的销售报告生成为纯文本并发给财务部门审批"),)
    window = _window(messages, 5)
    assert window.messages == ()
    assert window.tokens == 0
    assert [d.as_json() for d in window.dropped] == [
        {"section": "message", "sequence_no": 1, "priority": "P0", "reason": "over_budget"},
        {"section": "state", "sequence_no": None, "priority": "P1", "reason": "p0_incomplete"},
    ]


def test_when_p0_does_not_fit_the_newest_p0_messages_are_kept() -> None:
    messages = (_msg(1, "system", "Never reveal customer names."), _msg(2, "user", "summarise the june sales"))
    window = _window(messages, count_tokens("summarise the june sales"))
    assert _priorities(window) == {2: "P0"}
    assert [(d.sequence_no, d.priority.value) for d in window.dropped] == [(1, "P0")]


@pytest.mark.parametrize("budget", [0, -5])
def test_a_budget_below_one_is_the_callers_error(budget: int) -> None:
    with pytest.raises(ValueError, match="budget_tokens must be at least 1"):
        _window((_msg(1, "user", "hi"),), budget)


def test_a_large_tool_result_threshold_below_one_is_the_callers_error() -> None:
    with pytest.raises(ValueError, match="large_tool_result_tokens"):
        _window((_msg(1, "user", "hi"),), 100, large_tool_result_tokens=0)


_EXCHANGE = (
    _msg(1, "user", "查一下六月和七月的销售额"),
    _msg(2, "assistant", "", calls=("june", "july")),
    _msg(3, "tool", "六月销售额 1200 万元", answers="june"),
    _msg(4, "tool", "七月销售额 1350 万元", answers="july"),
    _msg(5, "user", "再对比一下去年同期的数据"),
)


def test_under_a_tight_budget_a_tool_call_and_its_results_are_dropped_together() -> None:
    request = count_tokens(_EXCHANGE[4].content)
    results_alone = count_tokens(_EXCHANGE[2].content) + count_tokens(_EXCHANGE[3].content)
    window = _window(_EXCHANGE, request + results_alone)  # room for both results, not for their call too
    assert _priorities(window) == {1: "P2", 5: "P0"}  # what the pair left over still takes the next claim
    assert {(d.sequence_no, d.reason.value) for d in window.dropped} == {
        (2, "pair_over_budget"),
        (3, "pair_over_budget"),
        (4, "pair_over_budget"),
    }


def test_at_every_budget_no_result_is_kept_without_its_call_nor_a_call_without_its_results() -> None:
    full = _window(_EXCHANGE, 10_000)
    assert full.dropped == ()
    for budget in range(1, full.tokens + 1):
        kept = {m.message.sequence_no for m in _window(_EXCHANGE, budget).messages}
        assert {2, 3, 4} <= kept or not {2, 3, 4} & kept, (budget, kept)


def test_older_tool_exchanges_are_history_and_only_the_recent_three_are_p1() -> None:
    messages: list[StageMessage] = [_msg(1, "user", "逐月查一下销售额")]
    for month in range(1, 6):
        call_seq = len(messages) + 1
        messages.append(_msg(call_seq, "assistant", "", calls=(f"m{month}",)))
        messages.append(_msg(call_seq + 1, "tool", f"{month} 月销售额 {month * 100} 万", answers=f"m{month}"))
    window = _window(tuple(messages), 10_000)
    assert _priorities(window) == {1: "P0", 2: "P2", 3: "P2", 4: "P2", 5: "P2", **dict.fromkeys(range(6, 12), "P1")}


def test_a_large_tool_result_enters_as_its_artifact_ref_and_a_digest_never_in_full() -> None:
    rows = " ".join(f"row{n} region{n % 7} amount{n * 13}" for n in range(300))
    messages = (
        _msg(1, "user", "导出全部销售明细"),
        _msg(2, "assistant", "", calls=("export",)),
        _msg(3, "tool", rows, answers="export"),
    )
    answer = _window(messages, 10_000, large_tool_result_tokens=400).as_json()
    result = answer["messages"][2]
    assert result["artifact_ref"] == "event:ev-3"
    digest = result["digest"]
    assert digest.endswith(CUT_MARK)
    shown = digest.removesuffix(CUT_MARK)
    assert rows.startswith(shown)
    assert rows[len(shown)] == " "  # cut between words
    assert count_tokens(shown) - MESSAGE_OVERHEAD <= DIGEST_TOKENS < count_tokens(rows[: len(shown) + 8])
    assert result["content"] == f"{digest}\n[full result: event:ev-3]"
    assert result["tokens"] == count_tokens(result["content"])
    assert rows not in json.dumps(answer)


def test_a_small_tool_result_is_kept_in_full() -> None:
    messages = (
        _msg(1, "user", "查一下"),
        _msg(2, "assistant", "", calls=("c",)),
        _msg(3, "tool", "共 3 条", answers="c"),
    )
    result = _window(messages, 1_000).as_json()["messages"][2]
    assert result["content"] == "共 3 条"
    assert "artifact_ref" not in result
    assert "digest" not in result


def test_a_chinese_digest_is_cut_at_a_character_and_one_endless_word_at_the_character_limit() -> None:
    chinese = "销售明细" * 200
    blob = "QUJD" * 500
    messages = (
        _msg(1, "user", "导出"),
        _msg(2, "assistant", "", calls=("zh", "blob")),
        _msg(3, "tool", chinese, answers="zh"),
        _msg(4, "tool", "x " * 10 + blob + " end " * 400, answers="blob"),
    )
    answer = _window(messages, 10_000, large_tool_result_tokens=100).as_json()
    zh_digest = answer["messages"][2]["digest"].removesuffix(CUT_MARK)
    assert zh_digest == chinese[:DIGEST_TOKENS]
    blob_digest = answer["messages"][3]["digest"].removesuffix(CUT_MARK)
    assert blob_digest == "x " * 9 + "x"  # the blob would pass the character limit: the digest stops before it
    endless = (_msg(1, "user", "导出"), _msg(2, "assistant", "", calls=("b",)), _msg(3, "tool", blob, answers="b"))
    only_blob = _window(endless, 10_000, large_tool_result_tokens=9).as_json()["messages"][2]["digest"]
    assert only_blob == blob[:DIGEST_MAX_CHARS] + CUT_MARK


def test_a_tool_result_without_an_earlier_call_is_refused() -> None:
    with pytest.raises(UnpairedToolResultError, match="'nope'"):
        _window((_msg(1, "user", "查"), _msg(2, "tool", "结果", answers="nope")), 100)
    with pytest.raises(UnpairedToolResultError, match="sequence_no 2"):
        _window(
            (
                _msg(1, "user", "查"),
                _msg(2, "tool", "结果", answers="later"),
                _msg(3, "assistant", "", calls=("later",)),
            ),
            100,
        )


def test_the_profile_is_its_own_counted_p0_section() -> None:
    profile = (_profile_entry("m-lang", "默认用中文回答", 1), _profile_entry("m-fmt", "输出格式默认 Markdown", 2))
    messages = (_msg(1, "user", "生成六月的报告"),)
    window = build_window(messages, budget_tokens=1_000, state=SessionState(None, {}, {}, (), ()), profile=profile)
    answer = window.as_json()
    assert answer["profile"] == [
        {
            "memory_id": "m-lang",
            "version": 1,
            "category": "PREFERENCE",
            "key": "response.language",
            "content": "默认用中文回答",
            "source_id": "src-m-lang",
            "captured_at": "2026-07-01T01:00:00+00:00",
            "tokens": count_tokens("默认用中文回答"),
        },
        {**profile[1].as_json()},
    ]
    assert answer["tokens"] == count_tokens("生成六月的报告") + profile[0].tokens + profile[1].tokens


def test_when_the_profile_does_not_fit_the_request_comes_first_then_the_newest_entry() -> None:
    profile = (_profile_entry("m-old", "默认用中文回答", 1), _profile_entry("m-new", "输出格式默认表格", 2))
    messages = (_msg(1, "user", "生成六月的报告"),)
    budget = count_tokens("生成六月的报告") + profile[1].tokens
    window = build_window(messages, budget_tokens=budget, state=derive_state(messages), profile=profile)
    assert [m.message.sequence_no for m in window.messages] == [1]
    assert [entry.memory_id for entry in window.profile] == ["m-new"]
    assert [d.as_json() for d in window.dropped] == [
        {"section": "profile", "sequence_no": None, "priority": "P0", "reason": "over_budget", "memory_id": "m-old"}
    ]


_CHIT_CHAT_THEN_A_LONG_REQUEST = (
    _msg(1, "user", "hi"),
    _msg(2, "assistant", "hello there"),
    _msg(3, "user", "ok thanks"),
    _msg(4, "user", "please " + "analyse this log line carefully " * 20),
)


def test_once_a_p0_claim_does_not_fit_nothing_of_lower_priority_takes_its_place() -> None:
    window = _window(_CHIT_CHAT_THEN_A_LONG_REQUEST, 40)
    assert window.messages == ()
    assert window.tokens == 0
    assert [(d.sequence_no, d.priority.value, d.reason.value) for d in window.dropped] == [
        (1, "P3", "p0_incomplete"),
        (2, "P2", "p0_incomplete"),
        (3, "P3", "p0_incomplete"),
        (4, "P0", "over_budget"),
    ]


def test_a_p0_claim_that_fits_after_one_that_did_not_is_still_kept() -> None:
    messages = (_msg(1, "system", "Never reveal customer names."), *_CHIT_CHAT_THEN_A_LONG_REQUEST[1:])
    window = _window(messages, 40)
    assert _priorities(window) == {1: "P0"}
    assert {d.sequence_no: d.reason.value for d in window.dropped} == {
        2: "p0_incomplete", 3: "p0_incomplete", 4: "over_budget"
    }


def test_the_current_request_comes_first_within_p0() -> None:
    question = "Here is the plan: " + "step " * 60 + " Shall I proceed?"
    messages = (_msg(1, "user", "Deploy the service to prod"), _msg(2, "assistant", question))
    assert _priorities(_window(messages, 10_000)) == {1: "P0", 2: "P0"}
    window = _window(messages, count_tokens(question))  # room for the newer question alone
    assert _priorities(window) == {1: "P0"}
    assert [(d.sequence_no, d.reason.value) for d in window.dropped] == [(2, "over_budget"), (None, "p0_incomplete")]


_CONSENT = (
    _msg(1, "user", "clean up the old release branches please"),
    _msg(2, "assistant", "Should I also delete the production database backups from last year?"),
    _msg(3, "user", "ok"),
    _msg(4, "user", "and list what you removed"),
)


def test_an_acknowledgement_answering_a_question_takes_its_priority_and_goes_with_it() -> None:
    full = _window(_CONSENT, 10_000)
    assert _priorities(full) == {1: "P2", 2: "P2", 3: "P2", 4: "P0"}
    for budget in range(1, full.tokens + 1):
        kept = {m.message.sequence_no for m in _window(_CONSENT, budget).messages}
        assert {2, 3} <= kept or not {2, 3} & kept, (budget, kept)
    question_and_answer = count_tokens(_CONSENT[1].content) + count_tokens("ok")
    window = _window(_CONSENT, count_tokens(_CONSENT[3].content) + question_and_answer)
    assert _priorities(window) == {2: "P2", 3: "P2", 4: "P0"}
    assert [(d.sequence_no, d.priority.value) for d in window.dropped] == [(1, "P2")]


def test_a_lone_acknowledgement_is_still_chit_chat() -> None:
    messages = (_msg(1, "assistant", "The branches are gone."), _msg(2, "user", "ok"), _msg(3, "user", "list the tags"))
    assert _priorities(_window(messages, 10_000)) == {1: "P2", 2: "P3", 3: "P0"}


def _handed(window: Window) -> int:
    """Every token the answer hands the model: messages, profile and the state section as rendered."""
    answer = window.as_json()
    state = json.dumps(answer["state"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    state_tokens = count_tokens(state) if answer["state"] else 0
    listed: list[int] = [m["tokens"] for m in answer["messages"]] + [p["tokens"] for p in answer["profile"]]
    return sum(listed) + state_tokens


def test_the_state_names_a_correction_left_out_by_reference_and_its_tokens_are_counted() -> None:
    correction = "actually " + "the numbers in the quarterly table are wrong " * 40
    messages = (_msg(1, "user", correction), _msg(2, "user", "redo the table for 2026-06"))
    full = _window(messages, 10_000).as_json()
    assert full["state"] == {"active_entities": {"month": "2026-06"}}
    budget = 60
    window = _window(messages, budget)
    answer = window.as_json()
    assert _priorities(window) == {2: "P0"}
    assert answer["state"] == {
        "active_entities": {"month": "2026-06"},
        "corrections": [{"sequence_no": 1, "event_id": "ev-1"}],
    }
    assert correction.strip() not in json.dumps(answer)
    assert answer["tokens"] == _handed(window) <= budget


def test_at_every_budget_the_reported_tokens_cover_all_the_answer_hands_and_stay_within_it() -> None:
    messages = (*_CONVERSATION, _msg(15, "user", "其实我要的是 task-1001 的 2026-06 报告，这次用纯文本"))
    full = _window(messages, 10_000)
    for budget in range(1, full.tokens + 2, 3):
        window = _window(messages, budget)
        assert window.tokens == _handed(window) <= budget, budget
