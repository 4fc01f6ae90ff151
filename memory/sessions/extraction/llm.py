"""The ``llm`` extractor: any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, a hosted API).

The model proposes; nothing it says is trusted. Its answer must be JSON of one exact shape (extra keys
refused, types strict): an answer that is not, as a whole, is one ``INVALID_ANSWER`` rejection and no
candidate; within a good answer each candidate is either fully valid or rejected with its reason
(``MISSING_FIELD``, ``INVALID_CATEGORY``, ``EVIDENCE_OUTSIDE_STAGE``, ``INVALID_ANSWER``), never half used.
This parser is the one place a category arrives as text. The gates run afterwards on what survives. A model
never proposes a SKILL_EXECUTION (refused as ``INVALID_CATEGORY``): those come from the stage's skill reports
alone, added here as the rules extractor finds them (:func:`~memory.sessions.extraction.rules.skill_executions`).

The endpoint is called through :mod:`memory.llm` (its :class:`LlmUnavailable` says whether a retry can help).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files
from typing import Annotated, Any, Literal

import httpx
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from memory.enums import Category, SourceLevel, Space
from memory.llm import LlmConfig, chat
from memory.sessions.constraints import slots_in
from memory.sessions.dedupe import space_for
from memory.sessions.extraction.base import Candidate, Extraction, Rejection, RejectionReason
from memory.sessions.extraction.rules import skill_executions, strip_remember_request
from memory.sessions.messages import MessageRole, Stage
from memory.text import normalize


def _not_blank(text: str) -> str:
    if not text.strip():
        raise PydanticCustomError("blank", "may not be empty")
    return text


_Text = Annotated[str, AfterValidator(_not_blank)]


class _Answered(BaseModel):
    """One candidate as the model must write it (the answer schema's item)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    category: _Text
    abstract: _Text
    overview: _Text
    content: _Text
    key: _Text | None
    source_level: Literal["E1", "E2", "E3", "E4"]
    evidence_event_ids: Annotated[list[_Text], Field(min_length=1)]
    correction: bool


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    candidates: list[dict[str, Any]]


PROPOSABLE = tuple(c for c in Category if c is not Category.SKILL_EXECUTION)
"""The categories a model may propose: a skill execution is a report the agent posted, never a model's reading."""

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["candidates"],
    "properties": {
        "candidates": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": list(_Answered.model_fields),
                "properties": {
                    "category": {"type": "string", "enum": [c.value for c in PROPOSABLE]},
                    "abstract": {"type": "string"},
                    "overview": {"type": "string"},
                    "content": {"type": "string"},
                    "key": {"type": ["string", "null"]},
                    "source_level": {"type": "string", "enum": [level.value for level in SourceLevel]},
                    "evidence_event_ids": {"type": "array", "items": {"type": "string"}},
                    "correction": {"type": "boolean"},
                },
            },
        }
    },
}
"""What the endpoint is asked to answer (``response_format`` json_schema, strict); :class:`_Answered` checks it."""


@cache
def system_prompt() -> str:
    """The instructions, from ``prompts/extract.md`` beside this module (shipped as package data)."""
    return files("memory.sessions.extraction").joinpath("prompts/extract.md").read_text(encoding="utf-8")


def transcript(stage: Stage) -> str:
    """The stage as the model reads it: a JSON array of ``{event_id, role, recalled_context, content}``.

    JSON, not headers between texts: a message's content is a string value, so a message cannot forge
    another message's header ("[event e9 | user]" in a tool result stays inside that tool result)."""
    return json.dumps(
        [
            {"event_id": m.event_id, "role": m.role.value, "recalled_context": bool(m.context_refs),
             "content": m.content}
            for m in stage.messages
        ],
        ensure_ascii=False,
        indent=1,
    )


def _field_of(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"]) or "the candidate"


def _value_of(answered: _Answered) -> str | None:
    """The slot's value from the overview's first line, ``CATEGORY key = value``, as the prompt asks."""
    if answered.key is None:
        return None
    first = answered.overview.strip().splitlines()[0]
    match = re.fullmatch(rf"\s*{re.escape(answered.category)}\s+{re.escape(answered.key)}\s*=\s*(.+?)\s*", first)
    return match.group(1) if match else None


KEYS: dict[str, Category] = {
    "profile.city": Category.PROFILE,
    "profile.employer": Category.PROFILE,
    "profile.occupation": Category.PROFILE,
    "profile.name": Category.PROFILE,
    "response.language": Category.PREFERENCE,
    "response.output_format": Category.PREFERENCE,
    "response.verbosity": Category.PREFERENCE,
}
"""The user's keys the prompt lists, with the one category each belongs to: such a key means "one value, the
newer supersedes", so a key the model invents would make its text supersede whatever else bears that key."""


def _slot_problem(answered: _Answered, value: str | None, stage: Stage) -> tuple[RejectionReason, str] | None:
    """Why the candidate's (key, value) cannot be used, or None: a key of the user's (a user-space category,
    or ``profile.*`` / ``response.*``) must be one the prompt lists, of the candidate's category, with its
    value; a response value must be what the content names; a profile value what a cited user message says.
    An agent's own lesson (TOOL_EXPERIENCE, ...) may name a key of its own: it only gathers occurrences."""
    key = answered.key
    if key is None:
        return None
    users = space_for(Category(answered.category)) is Space.USER or key.startswith(("profile.", "response."))
    if not users:
        return None
    if key not in KEYS:
        return RejectionReason.INVALID_ANSWER, f"key {key!r} is not one of {', '.join(KEYS)}"
    if KEYS[key].value != answered.category:
        return RejectionReason.INVALID_ANSWER, f"key {key!r} belongs to {KEYS[key].value}, not {answered.category}"
    if value is None:
        first_line = f"{answered.category} {key} = <value>"
        return RejectionReason.MISSING_FIELD, f"key {key!r} has no value (no overview first line {first_line!r})"
    if key.startswith("response."):  # the value is never quoted: it is the model's text, refused unread
        if slots_in(answered.content).get(key) != value:
            return RejectionReason.INVALID_ANSWER, f"the content does not name the value given for {key}"
        return None
    cited = set(answered.evidence_event_ids)
    said = [m.content for m in stage.messages if m.event_id in cited and m.role is MessageRole.USER]
    if not any(normalize(value) in normalize(text) for text in said):
        return RejectionReason.INVALID_ANSWER, f"no cited user message says the value of {key}"
    return None


def _candidate(index: int, item: dict[str, Any], stage: Stage) -> Candidate | Rejection:
    label = f"candidate {index + 1}"
    try:
        answered = _Answered.model_validate(item)
    except ValidationError as error:
        problems = error.errors()
        missing = [p for p in problems if p["type"] in ("missing", "blank", "too_short")]
        if missing:
            return Rejection(RejectionReason.MISSING_FIELD, f"{label}: {_field_of(missing[0])} is missing or empty")
        return Rejection(RejectionReason.INVALID_ANSWER, f"{label}: {_field_of(problems[0])}: {problems[0]['msg']}")
    evidence = tuple(dict.fromkeys(answered.evidence_event_ids))
    inside = tuple(event_id for event_id in evidence if event_id in stage.event_ids())
    if answered.category not in {category.value for category in PROPOSABLE}:
        known = ", ".join(PROPOSABLE)
        return Rejection(
            RejectionReason.INVALID_CATEGORY, f"{label}: category {answered.category!r} is not one of {known}", inside
        )
    if len(inside) < len(evidence):
        outside = [event_id for event_id in evidence if event_id not in inside]
        detail = f"{label}: cites events outside the stage: {outside}"
        return Rejection(RejectionReason.EVIDENCE_OUTSIDE_STAGE, detail, inside)
    value = _value_of(answered)
    slot_problem = _slot_problem(answered, value, stage)
    if slot_problem is not None:
        reason, problem = slot_problem
        return Rejection(reason, f"{label}: {problem}", inside)
    return Candidate(
        category=Category(answered.category),
        abstract=strip_remember_request(answered.abstract),
        overview=answered.overview,
        content=strip_remember_request(answered.content),
        source_level=SourceLevel(answered.source_level),
        evidence_event_ids=evidence,
        key=answered.key,
        value=value,
        correction=answered.correction,
    )


def parse_answer(content: str | None, stage: Stage) -> tuple[tuple[Candidate, ...], tuple[Rejection, ...]]:
    """The model's answer text → valid candidates and per-candidate rejections (or one INVALID_ANSWER)."""
    try:
        answer = _Answer.model_validate_json(content or "")
    except ValidationError as error:
        problem = error.errors()[0]
        detail = f"the model's answer is not the JSON asked for ({_field_of(problem)}: {problem['msg']})"
        return (), (Rejection(RejectionReason.INVALID_ANSWER, detail),)
    results = [_candidate(index, item, stage) for index, item in enumerate(answer.candidates)]
    return (
        tuple(r for r in results if isinstance(r, Candidate)),
        tuple(r for r in results if isinstance(r, Rejection)),
    )


class LlmExtractor:
    """Candidates from a model; pass ``client`` to share connections (its own timeout still applies)."""

    name: str = "llm"

    def __init__(self, config: LlmConfig, client: httpx.Client | None = None) -> None:
        self._config = config
        self._client = client

    def extract(self, stage: Stage) -> Extraction:
        completion = chat(
            self._config,
            [{"role": "system", "content": system_prompt()}, {"role": "user", "content": transcript(stage)}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "mnemo_extraction", "strict": True, "schema": ANSWER_SCHEMA}},
            client=self._client,
        )
        if completion is None:
            rejection = Rejection(RejectionReason.INVALID_ANSWER, "the endpoint's reply is not a chat completion")
            return Extraction((), (rejection,), extractor=self.name, model=self._config.model)
        candidates, rejections = parse_answer(completion.text, stage)
        unusable = not candidates and all(r.reason is RejectionReason.INVALID_ANSWER for r in rejections)
        # An unusable answer fails the commit and gives its stage back: the reports come with it next time.
        reports = () if rejections and unusable else skill_executions(stage)
        return Extraction(
            (*candidates, *reports),
            rejections,
            extractor=self.name,
            model=self._config.model,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
