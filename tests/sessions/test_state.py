"""Session state is read from the messages: temporary constraints, active entities, open questions, corrections."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.sessions.messages import MessageRole, StageMessage
from memory.sessions.state import SequenceOrderError, derive_state

_AT = datetime(2026, 7, 14, 6, 0, tzinfo=UTC)


def _msg(seq: int, role: str, content: str, *, context_refs: tuple[str, ...] = ()) -> StageMessage:
    return StageMessage(f"ev-{seq}", seq, MessageRole(role), content, _AT, context_refs=context_refs)


def test_a_temporary_constraint_lasts_the_session_and_a_later_one_for_its_key_replaces_it() -> None:
    state = derive_state(
        (
            _msg(1, "user", "继续上次报告，这次用纯文本"),
            _msg(2, "assistant", "好的。"),
            _msg(3, "user", "This time answer in English."),
            _msg(4, "user", "这次还是用 markdown 吧"),
        )
    )
    assert state.temporary_constraints == {"response.output_format": "markdown", "response.language": "en"}


def test_only_the_user_sets_temporary_constraints_and_a_lasting_preference_is_not_one() -> None:
    state = derive_state(
        (
            _msg(1, "assistant", "这次用纯文本回答。"),
            _msg(2, "user", "I prefer plain text in general."),
        )
    )
    assert state.temporary_constraints == {}


def test_months_and_dates_in_three_spellings_and_the_last_mention_wins() -> None:
    assert derive_state((_msg(1, "user", "看一下 2026年6月 的报告"),)).active_entities == {"month": "2026-06"}
    assert derive_state((_msg(1, "user", "the June 2026 numbers"),)).active_entities == {"month": "2026-06"}
    assert derive_state((_msg(1, "user", "Report for 2026-6, please"),)).active_entities == {"month": "2026-06"}
    later = derive_state((_msg(1, "user", "先看 2026-05，再看 Jul 2026"), _msg(2, "assistant", "好")))
    assert later.active_entities == {"month": "2026-07"}
    dates = derive_state((_msg(1, "user", "会议在 2026年7月3日，截止 15 August 2026"),))
    assert dates.active_entities == {"date": "2026-08-15"}


def test_what_is_no_real_month_or_day_is_no_entity() -> None:
    state = derive_state((_msg(1, "user", "编号 2026-13 和 2026-02-30 都不是日期"),))
    assert state.active_entities == {}


def test_the_sessions_own_task_wins_over_a_mentioned_one() -> None:
    messages = (_msg(1, "user", "task-1001 的报告呢？"), _msg(2, "assistant", "task-1002 也在等审批。"))
    mentioned = derive_state(messages)
    assert mentioned.active_task_id == "task-1002"
    assert mentioned.active_entities == {"task_id": "task-1002"}
    assert derive_state(messages, task_id="task-own").active_task_id == "task-own"


def test_an_assistant_question_is_pending_until_the_user_speaks_again() -> None:
    asked = (
        _msg(1, "user", "生成 6 月报告"),
        _msg(2, "assistant", "用人民币还是美元？"),
        _msg(3, "tool", '{"rows": 12}'),
        _msg(4, "assistant", "Shall I publish it now?  "),
    )
    state = derive_state(asked)
    assert [(q.sequence_no, q.event_id, q.text) for q in state.pending_questions] == [
        (2, "ev-2", "用人民币还是美元？"),
        (4, "ev-4", "Shall I publish it now?"),
    ]
    answered = derive_state((*asked, _msg(5, "user", "人民币，先别发布")))
    assert answered.pending_questions == ()


def test_a_request_to_confirm_is_a_question_without_a_question_mark_and_a_statement_is_not() -> None:
    state = derive_state(
        (
            _msg(1, "user", "发布前先给我看"),
            _msg(2, "assistant", "草稿在附件里，请确认后我再发布。"),
            _msg(3, "assistant", "I have generated the draft."),
        )
    )
    assert [q.sequence_no for q in state.pending_questions] == [2]


def test_user_corrections_are_found_in_chinese_and_english() -> None:
    state = derive_state(
        (
            _msg(1, "user", "我住在上海"),
            _msg(2, "user", "其实我已经搬到杭州了"),
            _msg(3, "user", "Actually, the report is for July."),
            _msg(4, "user", "不对，是 7 月的数据"),
            _msg(5, "assistant", "Actually, I made a mistake."),
        )
    )
    assert [(c.sequence_no, c.text) for c in state.corrections] == [
        (2, "其实我已经搬到杭州了"),
        (3, "Actually, the report is for July."),
        (4, "不对，是 7 月的数据"),
    ]


def test_recalled_context_sets_no_state() -> None:
    state = derive_state(
        (
            _msg(1, "user", "继续"),
            _msg(2, "assistant", "上次的任务是 task-9 的 2025年1月 报告？", context_refs=("memory:1",)),
        )
    )
    assert state.active_entities == {}
    assert state.active_task_id is None
    assert state.pending_questions == ()


def test_messages_out_of_sequence_order_are_refused() -> None:
    with pytest.raises(SequenceOrderError, match="sequence_no 1 after 2"):
        derive_state((_msg(2, "user", "b"), _msg(1, "user", "a")))


def test_as_json_is_the_seed_shape() -> None:
    state = derive_state(
        (_msg(1, "user", "继续 task-1001 的 2026-06 报告，这次用纯文本"), _msg(2, "assistant", "要加图表吗？")),
    )
    assert state.as_json() == {
        "active_task_id": "task-1001",
        "active_entities": {"task_id": "task-1001", "month": "2026-06"},
        "temporary_constraints": {"response.output_format": "plain_text"},
        "pending_questions": [{"sequence_no": 2, "event_id": "ev-2", "text": "要加图表吗？"}],
        "corrections": [],
    }
