"""The bilingual adversarial attribution corpus (``attribution_corpus.jsonl``): one utterance per line.

``label`` is ``forged`` (someone else's words, a task over handed-over text, a hypothetical, an example,
role-play, a transcript, or an instruction not to remember) or ``genuine`` (the user about themselves);
``fact`` is the statement as it stands verbatim in ``text`` (for a forged line, the forged statement a model
would propose); ``key`` / ``value`` the slot it fills, when it fills one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files
from typing import Literal

from memory.sessions.extraction.base import Candidate
from memory.text import normalize


@dataclass(frozen=True)
class Utterance:
    lang: Literal["en", "zh"]
    label: Literal["forged", "genuine"]
    kind: str
    text: str
    fact: str
    key: str | None
    value: str | None

    def stated_by(self, candidate: Candidate) -> bool:
        """Does ``candidate`` store this utterance's fact (its slot and value, or its sentence)?"""
        if self.key is not None and self.value is not None:
            return candidate.key == self.key and normalize(candidate.value or "") == normalize(self.value)
        return normalize(self.fact) in normalize(candidate.content)


def load() -> list[Utterance]:
    lines = files("tests.sessions").joinpath("attribution_corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return [Utterance(**json.loads(line)) for line in lines if line.strip()]


def forged() -> list[Utterance]:
    return [u for u in load() if u.label == "forged"]


def genuine() -> list[Utterance]:
    return [u for u in load() if u.label == "genuine"]
