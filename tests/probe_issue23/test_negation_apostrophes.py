"""Re-probe of issue 23: "I don\u2019t like cilantro" (a phone's apostrophe) held no negation word for
de-duplication, so it was skipped as a near duplicate of a stored "I like cilantro" — the user's "don't" lost and
the opposite kept as theirs. Every apostrophe counts as ``'``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory.sessions.negation import negations

APOSTROPHES = ("'", "\u2019", "\u02bc", "\uff07", "\u2032")
CONTRACTIONS = ("don't", "doesn't", "can't", "won't", "isn't", "didn't", "DON'T")


@given(words=st.lists(st.sampled_from(CONTRACTIONS), min_size=1, max_size=3),
       apostrophe=st.sampled_from(APOSTROPHES))
def test_a_contraction_is_a_negation_whatever_its_apostrophe(words: list[str], apostrophe: str) -> None:
    text = "I " + " and ".join(words) + " like cilantro"
    assert negations(text.replace("'", apostrophe)) == negations(text) == len(words)
