"""Re-probe of issue 23, finding 6: a reporting clause AFTER what it reports ("I live in Paris, Bob said.",
"我住在巴黎，他说。", "…, according to Tom.") blanked only its own clause, so the reported statement before it was
stored as the user's city. The whole sentence a closing reporting clause reports is now someone else's; the
user's own sentences around it, and a report that names its own subject ("…, and my boss said he lives in
Paris"), keep the user's statement.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.sessions.extraction.gates import GateResult, apply_gates
from memory.sessions.extraction.rules import RulesExtractor
from tests.sessions.stages import stage_of

EN_TAILS = (", Bob said.", ", my sister told me.", ", according to Tom.", ", or so Tom says.", ", my boss claimed.",
            ", according to my old friend Tom.", ", she wrote.")
ZH_TAILS = ("，他说。", "，我朋友说。", "，她告诉我。", "，据说。", "，小王讲。", "，他说")
EN_CITIES = ("Paris", "Lisbon", "Cairo", "Oslo")
ZH_CITIES = ("巴黎", "广州", "成都", "纽约")


def _cities(*texts: str) -> list[str | None]:
    stage = stage_of(*(("user", text) for text in texts))
    result: GateResult = apply_gates(stage, RulesExtractor().extract(stage))
    return [c.value for c in result.admitted if c.key == "profile.city"]


@settings(max_examples=60, deadline=None)
@given(lang=st.sampled_from(["en", "zh"]), data=st.data(), own_after=st.booleans())
def test_a_closing_reporting_clause_makes_its_sentence_someone_elses(lang: str, data: st.DataObject,
                                                                     own_after: bool) -> None:
    if lang == "en":
        city, tail = data.draw(st.sampled_from(EN_CITIES)), data.draw(st.sampled_from(EN_TAILS))
        reported, own = f"I live in {city}{tail}", "I live in Shanghai."
    else:
        city, tail = data.draw(st.sampled_from(ZH_CITIES)), data.draw(st.sampled_from(ZH_TAILS))
        reported, own = f"我住在{city}{tail}", "我住在上海。"
    text = f"{reported} {own}" if own_after and tail[-1] in ".。" else reported
    cities = _cities(text)
    assert city not in cities, (text, cities)
    if text != reported:  # the user's own sentence after it is still theirs
        assert cities == ["Shanghai" if lang == "en" else "上海"], (text, cities)


@pytest.mark.parametrize(("text", "city"), [
    ("I live in Shanghai, and my boss said he lives in Paris.", "Shanghai"),
    ("I live in Shanghai, I told you.", "Shanghai"),
    ("我住在上海，我跟你说过。", "上海"),
    ("我住在上海，老实说。", "上海"),
])
def test_the_users_own_words_before_a_report_of_their_own_stay_theirs(text: str, city: str) -> None:
    assert _cities(text) == [city]
