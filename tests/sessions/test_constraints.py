"""Response slots named in text: a negated slot is not named, temporary markers, and the stable choices (E3)
that are counted from them."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.dialects.postgresql import insert

from memory.db import tenant_session
from memory.sessions.constraints import is_temporary, keys_spoken_of, slots_in, temporary_constraints
from memory.sessions.models import ChatSession, SessionChoice
from tests.conftest import MakeKey
from tests.sessions.conftest import commit, post, say


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("这次不要用英文", {}),
        ("这次不用markdown", {}),
        ("这次别用表格", {}),
        ("for now, no tables", {}),
        ("please don't use markdown", {}),
        ("这次用中文，不要英文", {"response.language": "zh"}),
        ("不要英文，用中文", {"response.language": "zh"}),
        ("用中文而不是英文", {"response.language": "zh"}),
        ("answer in English instead of Chinese", {"response.language": "en"}),
        ("不要表格用英文", {"response.language": "en"}),
        ("no markdown please", {"response.output_format": "plain_text"}),
        ("以后都用英文，简短一点", {"response.language": "en", "response.verbosity": "brief"}),
    ],
)
def test_a_negated_slot_is_not_named_and_the_positive_one_beside_it_wins(text: str, expected: dict[str, str]) -> None:
    assert slots_in(text) == expected


def test_a_refused_slot_is_still_spoken_of() -> None:
    assert keys_spoken_of("不要用表格。") == ("response.output_format",)
    assert keys_spoken_of("这次用中文，不要英文，简短一点") == ("response.language", "response.verbosity")
    assert keys_spoken_of("我住在上海") == ()


@pytest.mark.parametrize("text", ["这次不要用英文", "这次不用markdown", "这次别用表格", "for now, no tables"])
def test_a_negated_temporary_constraint_sets_no_choice(text: str) -> None:
    assert is_temporary(text) and temporary_constraints(text) == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I prefer English for this session", {"response.language": "en"}),
        ("in this conversation I'd prefer tables", {"response.output_format": "table"}),
        ("right now I prefer short answers", {"response.verbosity": "brief"}),
        ("I prefer plain text for the next few answers", {"response.output_format": "plain_text"}),
        ("今天我比较喜欢简短的回答", {"response.verbosity": "brief"}),
        ("这周我习惯用英文", {"response.language": "en"}),
        ("我喜欢这个回答用表格", {"response.output_format": "table"}),
        ("先用英文回答", {"response.language": "en"}),
    ],
)
def test_wording_for_now_outside_the_first_markers_is_temporary(text: str, expected: dict[str, str]) -> None:
    assert temporary_constraints(text) == expected


@pytest.mark.parametrize("text", ["今天下午三点开会", "I'm flying to Berlin today", "以后都用英文", "I prefer tables"])
def test_a_word_of_time_without_a_response_slot_or_a_stable_preference_is_not_temporary(text: str) -> None:
    assert not is_temporary(text)


def test_a_negated_choice_in_three_sessions_is_no_stable_preference(
    sessions_api: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    for n in (1, 2, 3):
        post(sessions_api, key, f"s-neg-{n}", say(f"neg-{n}", "user", "这次不要用英文。"))
        done = commit(sessions_api, key, f"s-neg-{n}", f"c-neg-{n}")
        assert done["memories"]["created"] == [] and done["stats"]["rejected"] == {"temporary_constraint": 1}


def test_a_choice_recorded_by_an_older_reading_of_its_message_is_not_counted(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    for n in (1, 2, 3):
        [event_id] = post(sessions_api, key, f"s-old-{n}", say(f"old-{n}", "user", "这次不要用英文。"))
        with tenant_session(engine, tenant) as session:  # as the reading before negations were seen recorded it
            user_id = session.execute(
                select(ChatSession.user_id).where(ChatSession.session_id == f"s-old-{n}")
            ).scalar_one()
            session.execute(insert(SessionChoice).values(
                tenant_id=tenant, event_id=uuid.UUID(event_id), choice_key="response.language", user_id=user_id,
                session_id=f"s-old-{n}", choice_value="en",
            ))
    post(sessions_api, key, "s-old-4", say("old-4", "user", "这次用英文回答。"))
    done = commit(sessions_api, key, "s-old-4", "c-old-4")
    assert done["memories"]["created"] == [], done
    assert done["stats"]["rejected"] == {"temporary_constraint": 1}

