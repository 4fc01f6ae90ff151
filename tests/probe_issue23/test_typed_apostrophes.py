"""Re-probe of issue 23, finding 6: the attribution markers are ASCII, so the same instruction typed the way a
phone or a word processor types it ("Don\u2019t remember …", with U+2019) or in full-width forms was not seen,
and "Don\u2019t remember that I live in Berlin" was stored as the user's city. Each forged utterance of the
corpus, with its apostrophes and quotes retyped, must still be refused for the same reason; and end to end the
retyped instruction forgets the existing memory.
"""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.sessions.extraction.base import RejectionReason
from memory.sessions.extraction.gates import apply_gates
from memory.sessions.extraction.rules import RulesExtractor
from tests.conftest import MakeKey, auth, poll
from tests.sessions.attribution_corpus import Utterance, forged
from tests.sessions.conftest import commit, post, say
from tests.sessions.stages import stage_of

APOSTROPHES = ("\u2019", "\u02bc", "\uff07", "\u2032")
ATTRIBUTION = {RejectionReason.NOT_SELF_STATEMENT, RejectionReason.FORGET_INSTRUCTION}


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@settings(max_examples=60, deadline=None)
@given(utterance=st.sampled_from(forged()), apostrophe=st.sampled_from(APOSTROPHES),
       curly_quotes=st.booleans(), widen_marker=st.booleans())
def test_retyped_forgeries_are_refused_for_the_same_reason(
    utterance: Utterance, apostrophe: str, curly_quotes: bool, widen_marker: bool
) -> None:
    text = utterance.text.replace("'", apostrophe)
    if curly_quotes:
        text = text.replace(apostrophe, "\u2019").replace(' \u2019', " \u2018")
    if widen_marker and utterance.fact in text:  # the words around the fact typed full-width, the fact as is
        before, _, after = text.partition(utterance.fact)
        text = _full_width(before) + utterance.fact + _full_width(after)
    stage = stage_of(("user", text))
    result = apply_gates(stage, RulesExtractor().extract(stage))
    assert not [c for c in result.admitted if utterance.stated_by(c)], (text, result.admitted)
    if utterance.kind == "dont_remember" and result.rejections:
        assert {r.reason for r in result.rejections} == {RejectionReason.FORGET_INSTRUCTION}, text
    assert {r.reason for r in result.rejections} <= ATTRIBUTION | {RejectionReason.TEMPORARY_CONSTRAINT}


@pytest.mark.parametrize("text", ["Don\u2019t remember that I live in Berlin.",
                                  "Don\uff07t remember that I live in Berlin.",
                                  "\uff24\uff4f\uff4e'\uff54 remember that I live in Berlin."])
def test_a_retyped_dont_remember_is_an_instruction_not_a_fact(text: str) -> None:
    stage = stage_of(("user", text))
    result = apply_gates(stage, RulesExtractor().extract(stage))
    assert result.admitted == ()
    assert [r.reason for r in result.rejections] == [RejectionReason.FORGET_INSTRUCTION]


def test_dont_remember_typed_with_a_curly_apostrophe_forgets_the_existing_memory(
    sessions_api: TestClient, make_key: MakeKey
) -> None:
    key = make_key(tenant=f"t-{uuid.uuid4().hex[:12]}")
    post(sessions_api, key, "s-berlin", say("b1", "user", "I live in Berlin."))
    [berlin] = [m for m in commit(sessions_api, key, "s-berlin", "c-berlin")["memories"]["created"]
                if m["key"] == "profile.city"]

    sessions_api.post("/sessions", json={"session_id": "s-forget"}, headers=auth(key))
    answer = sessions_api.post("/sessions/s-forget/messages", headers=auth(key), json={"messages": [
        say("g1", "user", "Don\u2019t remember that I live in Berlin.")]})
    assert answer.status_code == 201, answer.text
    [job] = answer.json()["forgotten"]
    assert job["memory_id"] == berlin["memory_id"]
    finished = poll(sessions_api, key, f"/memory-deletions/{job['job_id']}",
                    lambda body: body["status"] in ("completed", "failed_requires_action"), 90)
    assert finished["status"] == "completed", finished
    done = commit(sessions_api, key, "s-forget", "c-forget")
    assert done["memories"].get("created", []) == [] and done["memories"].get("merged", []) == [], done
    assert sessions_api.get(f"/memories/{berlin['memory_id']}", headers=auth(key)).status_code == 404
