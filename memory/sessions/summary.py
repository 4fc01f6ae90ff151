"""Structured, extractive summaries of a stage (seed 003 §5): compress the history, never upgrade a fact.

Every item is a source sentence kept verbatim, so a negation, a condition, a time, an uncertainty and an
unfinished state survive by construction: "报告草稿已经生成，但尚未审批，也没有发布。" can land in
``pending`` whole, never in ``completed`` and never as "报告已完成". A semicolon joins the clauses of one
sentence ("已经生成；但还没有审批"), so it never splits one. Sentences are sorted into the eight sections by
Chinese and English cue words; a sentence matches the first section of :data:`_PRECEDENCE` whose cues it
has, so an unfinished state ("not approved") wins over a completion ("generated"), and a question
("已经发布了吗？") is never a completion nor a decision.

Skipped: system messages (the agent's configuration, not the conversation) and recalled context (messages
carrying ``context_refs``: a bundle's text is cited where it came from, never summarised again as new).
:func:`check_faithful` guards any summarizer, this one or a future model-written one, against the drift
seed 003 §5.1 warns about.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memory.sessions.constraints import keys_spoken_of, mentions_a_slot
from memory.sessions.extraction.gates import secret_kind
from memory.sessions.messages import MessageRole, Stage, StageMessage
from memory.sessions.negation import NEGATION
from memory.sessions.state import require_sequence_order
from memory.text import normalize, tokens
from memory.tokens import count_tokens

ABSTRACT_TOKENS = 100
"""L0 budget (``count_tokens``): whole sentences up to it, the first one even if it alone is longer."""

_SENTENCE_END = re.compile(r"[。！？\n]+|[.!?]+(?=\s|$)")
_CLOSERS = "\"'\u201d\u2019」』）)]】"

_COMPLETION_VERBS_ZH = "完成|生成|发布|审批|审核|提交|通过|批准|上线|发送|处理|解决|修复|做完|确认|部署|合并"
_COMPLETION_VERBS_EN = (
    "approved|published|done|finished|completed?|generated|submitted|sent|reviewed|released|deployed|merged|"
    "resolved|fixed|confirmed|created|uploaded"
)


def _cues(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_ERRORS = _cues(
    r"失败|错误|报错|出错|异常|超时|崩溃|\bfail(?:ed|s|ure|ing)?\b|\berrors?\b|\bexceptions?\b|\btime[d ]?out\b|"
    r"\bcrash|\bbroken\b"
)
_PENDING = _cues(
    r"尚未|还没|未(?!来|知|必|免)|待(?:审|处理|定|确认|办|发布|完成|补充|跟进|评审|核|批)|等待|等着|"
    rf"(?:没有?|不)(?:被)?(?:{_COMPLETION_VERBS_ZH})|(?:将要|将会|将在|即将|打算|准备|计划)\S{{0,8}}(?:{_COMPLETION_VERBS_ZH})|"
    r"\bnot yet\b|\bpending\b|\bstill (?:need|have|has|to)\b|\bwaiting (?:for|on)\b|\btodo\b|"
    rf"(?:\bnot|n't|\bnever)\s+(?:(?:yet|been|be|being)\s+)*(?:{_COMPLETION_VERBS_EN})\b|"
    rf"\b(?:will|going to|shall|must|should|needs? to|has to|have to)\s+(?:be\s+)?(?:{_COMPLETION_VERBS_EN})\b|"
    rf"没有?人\S{{0,4}}?(?:{_COMPLETION_VERBS_ZH})|\b(?:nobody|no one)\b|\bbut(?=\s+not\b)|"
    rf"\bexcept\b|\bapart from\b|除了.{{0,30}}?(?:{_COMPLETION_VERBS_ZH})"
)
"""An unfinished state: a pending word, a negated completion ("没有发布", "not approved", "nobody has
reviewed it"), a completion with an exception ("except for the EU region", "除了欧盟区都部署了") or a future one."""
_FUTURE = _cues(r"\b(?:will|going to|gonna)\s+[a-z]+|'ll\s+[a-z]+")
"""A deed still to come ("I will deploy it tomorrow"); weighed after the decisions and goals, so "we'll use X"
stays a decision and "I want to know if it will pass" a goal."""
_UNKNOWNS = _cues(
    r"不确定|不知道|不清楚|可能|也许|或许|大概|未知|估计|似乎|好像|\bnot sure\b|\bunsure\b|\bmaybe\b|\bperhaps\b|"
    r"\bprobably\b|\bpossibly\b|\bunknown\b|\bunclear\b|\bmight\b|\bi guess\b"
)
DECISIONS = _cues(
    r"决定|就用|定了|确定用|选定|采用|\bdecided\b|\blet'?s go with\b|\bwe'?ll use\b|\bwe will use\b|\bgoing with\b|"
    r"\bagreed\b|\bwe chose\b"
)
_CONSTRAINTS = _cues(
    r"必须|不要|不能|不可以|不许|禁止|务必|一定要|只(?!是)|别(?!的|人|处)|如果|假如|除非|"
    r"\bmust\b|\bdon'?t\b|\bdo not\b|\bonly\b|\bnever\b|\bcannot\b|\bcan'?t\b|\bshould(?:n'?t| not)\b|"
    r"\bif\b|\bunless\b|\bat (?:most|least)\b"
)
_GOAL = _cues(
    r"目标|我想|我要|帮我|请帮|请你|麻烦你|我需要|需要你|\bi want\b|\bi'?d like\b|\bi would like\b|\bi need\b|"
    r"\bneed to\b|\bgoal\b|\bhelp me\b|\bcan you\b|\bcould you\b|\bplease\b"
)
_COMPLETED = _cues(
    rf"已经?[^\s，,。；;！!？?]{{0,12}}?了|已(?:经)?(?:{_COMPLETION_VERBS_ZH})|做完|搞定|\b(?:{_COMPLETION_VERBS_EN})\b"
)

_SECTIONS = ("goal", "facts", "decisions", "constraints", "completed", "pending", "unknowns", "errors")
_PRECEDENCE: tuple[tuple[str, Callable[[str], object]], ...] = (
    ("errors", _ERRORS.search),
    ("pending", _PENDING.search),
    ("unknowns", _UNKNOWNS.search),
    ("decisions", DECISIONS.search),
    ("constraints", lambda sentence: _CONSTRAINTS.search(sentence) or mentions_a_slot(sentence)),
    ("pending", _CONSTRAINTS.search),
    ("goal", _GOAL.search),
    ("pending", _FUTURE.search),
    ("completed", _COMPLETED.search),
)
"""A sentence naming a response preference ("这次用纯文本") is a constraint even without a constraint word.
A condition or a limit is a constraint when the user sets it; the assistant and tools set none, so one they
state ("明天如果测试通过就发布", "but only the draft version") is an unfinished state: the second
``pending`` entry is reached only by roles without ``constraints``."""
_NEVER_ASKED = frozenset({"completed", "decisions"})
"""A question states neither: "Is the report published?" is an unknown."""
_QUESTION_END = re.compile(r"(?:[?？]|吗)[\s。！？.!?]*$")
_QUALIFYING = frozenset({"pending", "unknowns", "errors"})
"""What a completion said beside them must not lose (:func:`check_faithful`)."""
_UNCAPPED = frozenset({"pending", "unknowns", "errors", "constraints"})
"""Sections the summary keeps whole, however long the session: dropping one item would turn what is unfinished,
unknown, failed or forbidden into silence."""
_ALLOWED: dict[MessageRole, frozenset[str]] = {
    MessageRole.USER: frozenset(_SECTIONS),
    MessageRole.ASSISTANT: frozenset({"decisions", "completed", "pending", "unknowns", "errors"}),
    MessageRole.TOOL: frozenset({"facts", "completed", "pending", "unknowns", "errors"}),
}
"""Goals and constraints are the user's; facts are what the user or a tool said, never the model's own prose."""
_ABSTRACT_ORDER = ("goal", "pending", "errors", "completed", "decisions", "unknowns", "constraints", "facts")
_HEADINGS = {name: name.capitalize() for name in _SECTIONS}

_CHIT_CHAT = re.compile(
    r"(?:(?:hi|hello|hey|thanks|thank you|thx|ok|okay|got it|great|cool|sure|nice|bye|"
    r"你好|您好|谢谢|多谢|感谢|好的|好滴|好|嗯|哦|收到|明白了?|没问题|哈哈+|行|可以)[\s\W]*)+",
    re.IGNORECASE,
)
_FACT_MIN_TOKENS = 3
"""Fewer search tokens than this ("OK", ``{"ok": 1}``) carry no fact worth a line."""

_MARKERS: dict[str, re.Pattern[str]] = {
    "negation": NEGATION,
    "condition": _cues(r"如果|假如|要是|除非|只要|一旦|否则|\bif\b|\bunless\b|\bprovided\b|\bin case\b|\botherwise\b"),
    "time": _cues(
        r"\d{4}-\d{1,2}(?:-\d{1,2})?|\d+\s*[年月日号点]|今天|明天|昨天|前天|后天|[上下本这]周[一二三四五六日天]?|"
        r"[上下]个?月|月[底初]|周[一二三四五六日天]|星期[一二三四五六日天]|之前|以前|之后|以后|\d{1,2}[:：]\d{2}|"
        r"\b(?:today|tomorrow|yesterday|tonight|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
        r"january|february|march|april|june|july|august|september|october|november|december|"
        r"before|after|until|deadline)\b|\d{1,2}\s*(?:am|pm)\b"
    ),
    "uncertainty": _UNKNOWNS,
    "unfinished": _cues(f"{_PENDING.pattern}|{_FUTURE.pattern}"),
}
"""What seed 003 §5.1 says a summary must never drop; :func:`check_faithful` compares them item to source."""
_COMPLETION_CLAIM = _cues(r"完成了|已完成|已经完成|\bdone\b|\bfinished\b|\bcomplete(?:d)?\b")
_RELATED_SHARE = 0.5
"""A source sentence sharing this share of an item's search tokens is what the item summarises."""


class EmptyStageError(ValueError):
    """A stage without messages has nothing to summarise."""


class TaskObservationError(ValueError):
    """A task observation must name the task, its status and its state_version."""


@dataclass(frozen=True)
class SummaryItem:
    text: str
    """A source sentence, verbatim."""
    source_event_ids: tuple[str, ...]
    """Every event that says this sentence (identical sentences are one item), in sequence order."""
    key: str | None = None
    """The response slot a constraint or decision names (``response.output_format``), if any."""

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "source_event_ids": list(self.source_event_ids), "key": self.key}


@dataclass(frozen=True)
class StructuredSummary:
    goal: tuple[SummaryItem, ...]
    facts: tuple[SummaryItem, ...]
    decisions: tuple[SummaryItem, ...]
    constraints: tuple[SummaryItem, ...]
    completed: tuple[SummaryItem, ...]
    pending: tuple[SummaryItem, ...]
    unknowns: tuple[SummaryItem, ...]
    errors: tuple[SummaryItem, ...]
    from_sequence: int
    to_sequence: int
    abstract: str
    """L0: one line of whole sentences."""
    task_observation: dict[str, Any] | None
    """The task as seen at build time; a reader re-reads the task before acting on it."""

    def sections(self) -> dict[str, tuple[SummaryItem, ...]]:
        return {name: getattr(self, name) for name in _SECTIONS}

    def as_json(self) -> dict[str, Any]:
        return {
            "source_range": {"from_sequence": self.from_sequence, "to_sequence": self.to_sequence},
            "abstract": self.abstract,
            **{name: [item.as_json() for item in items] for name, items in self.sections().items()},
            "task_observation": None if self.task_observation is None else dict(self.task_observation),
        }

    def overview(self) -> str:
        """L1: the non-empty sections, each a heading and its items, plus the task as observed."""
        lines = [f"Messages {self.from_sequence}-{self.to_sequence}"]
        for name, items in self.sections().items():
            if items:
                lines.append(_HEADINGS[name])
                lines.extend(f"- {item.text}" for item in items)
        if self.task_observation is not None:
            observed = ", ".join(f"{key}: {value}" for key, value in self.task_observation.items())
            lines.append(f"Task as observed ({observed}); re-read the task before acting on it.")
        return "\n".join(lines)


@dataclass
class _Draft:
    section: str
    text: str
    event_ids: list[str]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, each a verbatim substring with its end mark and closing quotes.

    CJK marks (。！？；) and newlines always end one; ASCII marks (.!?;) only before a space or the end, so
    ``3.5``, ``v1.2`` and ``e.g.x`` stay whole.
    """
    out: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        while end < len(text) and text[end] in _CLOSERS:
            end += 1
        _keep(out, text[start:end])
        start = end
    _keep(out, text[start:])
    return out


def _keep(out: list[str], piece: str) -> None:
    sentence = piece.strip()
    if sentence.strip(_CLOSERS + "。！？；.!?;"):
        out.append(sentence)


def is_chit_chat(text: str) -> bool:
    """Greetings, thanks and acknowledgements ("好的", "ok thanks") and nothing else."""
    stripped = text.strip()
    return bool(stripped) and _CHIT_CHAT.fullmatch(stripped) is not None


def summarize(
    stage: Stage, *, task_observation: Mapping[str, Any] | None = None, max_items_per_section: int = 12
) -> StructuredSummary:
    """The extractive summary of ``stage``; goal, facts, decisions and completed keep their latest
    ``max_items_per_section`` items, the :data:`_UNCAPPED` sections keep all of theirs."""
    if not stage.messages:
        raise EmptyStageError(f"stage of session {stage.session_id} has no messages to summarise")
    if max_items_per_section < 1:
        raise ValueError(f"max_items_per_section must be at least 1, not {max_items_per_section}")
    require_sequence_order(stage.messages)
    drafts: dict[str, _Draft] = {}
    memo: dict[tuple[MessageRole, str], str | None] = {}
    for message in stage.messages:
        for sentence, section in _classified(message, memo):
            draft = drafts.setdefault(_identity(sentence), _Draft(section, sentence, []))
            if message.event_id not in draft.event_ids:
                draft.event_ids.append(message.event_id)
    by_section: dict[str, tuple[SummaryItem, ...]] = {}
    for name in _SECTIONS:
        chosen = [draft for draft in drafts.values() if draft.section == name]
        if name not in _UNCAPPED:
            chosen = chosen[-max_items_per_section:]
        by_section[name] = tuple(_item(draft) for draft in chosen)
    return StructuredSummary(
        goal=by_section["goal"],
        facts=by_section["facts"],
        decisions=by_section["decisions"],
        constraints=by_section["constraints"],
        completed=by_section["completed"],
        pending=by_section["pending"],
        unknowns=by_section["unknowns"],
        errors=by_section["errors"],
        from_sequence=stage.from_sequence,
        to_sequence=stage.to_sequence,
        abstract=_abstract(by_section),
        task_observation=_observation(task_observation),
    )


def _classified(message: StageMessage, memo: dict[tuple[MessageRole, str], str | None]) -> list[tuple[str, str]]:
    """The message's sentences with their sections; ``memo`` spares repeated sentences (log lines, table rows)
    the cue scan."""
    allowed = _ALLOWED.get(message.role)
    if allowed is None or message.context_refs:
        return []
    out: list[tuple[str, str]] = []
    for sentence in split_sentences(message.content):
        if secret_kind(sentence) is not None:  # a summary is a copy: a secret is never copied (seed 003 §6)
            continue
        key = (message.role, sentence)
        if key not in memo:
            memo[key] = _section(sentence, allowed)
        section = memo[key]
        if section is not None:
            out.append((sentence, section))
    return out


def _section(sentence: str, allowed: frozenset[str]) -> str | None:
    if is_chit_chat(sentence):
        return None
    question = is_question(sentence)
    for name, matches in _PRECEDENCE:
        if name in allowed and matches(sentence):
            if question and name in _NEVER_ASKED:
                return "unknowns" if "unknowns" in allowed else None
            return name
    informative = len(tokens(sentence)) >= _FACT_MIN_TOKENS and not question
    return "facts" if informative and "facts" in allowed else None


def is_question(sentence: str) -> bool:
    """Does ``sentence`` end in a question mark or in 吗 ("已经发布了吗")?"""
    return _QUESTION_END.search(sentence.rstrip(_CLOSERS)) is not None


def _identity(sentence: str) -> str:
    return " ".join(normalize(sentence).split())


def _item(draft: _Draft) -> SummaryItem:
    key = next(iter(keys_spoken_of(draft.text)), None) if draft.section in ("constraints", "decisions") else None
    return SummaryItem(text=draft.text, source_event_ids=tuple(draft.event_ids), key=key)


def _abstract(by_section: Mapping[str, tuple[SummaryItem, ...]]) -> str:
    """Whole sentences in :data:`_ABSTRACT_ORDER` while they fit :data:`ABSTRACT_TOKENS`; never a cut one."""
    chosen: list[str] = []
    for name in _ABSTRACT_ORDER:
        for item in by_section[name]:
            candidate = _joined([*chosen, item.text])
            if chosen and count_tokens(candidate) > ABSTRACT_TOKENS:
                return _joined(chosen)
            chosen.append(item.text)
    return _joined(chosen)


def _joined(sentences: list[str]) -> str:
    text = ""
    for sentence in sentences:
        text += sentence if not text or text[-1] in "。！？；" else " " + sentence
    return text


def _observation(observation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if observation is None:
        return None
    missing = [key for key in ("task_id", "status", "state_version") if key not in observation]
    if missing:
        raise TaskObservationError(f"task_observation lacks {', '.join(missing)}")
    return dict(observation)


def check_faithful(summary: StructuredSummary, stage: Stage) -> list[str]:
    """What makes ``summary`` unfaithful to ``stage`` (``[]`` when nothing does).

    Each item must be verbatim in one of the events it cites, cite only events of the stage, and keep every
    negation, condition, time, uncertainty and unfinished-state marker of the source sentences it covers;
    the summary's range must be the stage's; a completed item must come with every unfinished state its source
    event says beside it ("The report is published. But only the draft version…"); the abstract may claim
    completion only where the stage states that completion in a sentence with no unfinished state.
    """
    contents = {message.event_id: message.content for message in stage.messages}
    sentences: dict[str, dict[str, None]] = {}
    problems: list[str] = []
    if (summary.from_sequence, summary.to_sequence) != (stage.from_sequence, stage.to_sequence):
        problems.append(
            f"summary range {summary.from_sequence}-{summary.to_sequence} is not the stage's "
            f"{stage.from_sequence}-{stage.to_sequence}"
        )
    for name, items in summary.sections().items():
        for item in items:
            problems.extend(_item_problems(name, item, contents, sentences))
    problems.extend(_sibling_problems(summary, stage))
    problems.extend(_abstract_problems(summary.abstract, stage))
    return problems


def _item_problems(
    section: str, item: SummaryItem, contents: Mapping[str, str], sentences: dict[str, dict[str, None]]
) -> list[str]:
    """``sentences`` caches each cited event's distinct sentences across items.

    An item that is a whole sentence of an event is its own source there; otherwise the sentences it was cut
    from or summarises are, and each must keep its markers in the item."""
    if not item.source_event_ids:
        return [f"{section} item {item.text!r} cites no source event"]
    problems = [
        f"{section} item {item.text!r} cites event {event_id}, which is not in the stage"
        for event_id in item.source_event_ids
        if event_id not in contents
    ]
    sources = [(event_id, contents[event_id]) for event_id in item.source_event_ids if event_id in contents]
    if sources and not any(item.text in content for _, content in sources):
        problems.append(f"{section} item {item.text!r} is not verbatim in any event it cites")
    own = frozenset(tokens(item.text))
    for event_id, content in sources:
        if event_id not in sentences:
            sentences[event_id] = dict.fromkeys(split_sentences(content))
        if item.text in sentences[event_id]:
            continue
        for sentence in sentences[event_id]:
            if _covers(item.text, own, sentence):
                problems.extend(
                    f"{section} item {item.text!r} drops the {kind} {marker!r} of {sentence!r} (event {event_id})"
                    for kind, marker in _dropped_markers(item.text, sentence)
                )
    return problems


def _sibling_problems(summary: StructuredSummary, stage: Stage) -> list[str]:
    """A completed item whose event also says something unfinished, uncertain or failed that no item covers."""
    messages = {message.event_id: message for message in stage.messages}
    items = [item for section in summary.sections().values() for item in section]
    problems: list[str] = []
    for item in summary.completed:
        for event_id in item.source_event_ids:
            message = messages.get(event_id)
            if message is None:
                continue
            for sentence in _qualifiers(message):
                if sentence != item.text and not any(
                    event_id in other.source_event_ids and _covers(other.text, frozenset(tokens(other.text)), sentence)
                    for other in items
                ):
                    problems.append(
                        f"completed item {item.text!r} is shown without {sentence!r}, which event {event_id} says "
                        "beside it"
                    )
    return problems


def _qualifiers(message: StageMessage) -> list[str]:
    """The sentences of ``message`` that this reading files as pending, unknown or an error, or that carry an
    unfinished-state marker."""
    allowed = _ALLOWED.get(message.role, frozenset())
    return [
        sentence
        for sentence in split_sentences(message.content)
        if _MARKERS["unfinished"].search(sentence) or _section(sentence, allowed) in _QUALIFYING
    ]


def _covers(text: str, own: frozenset[str], sentence: str) -> bool:
    """Is ``sentence`` what ``text`` summarises: inside it, around it, or sharing most of its search tokens?"""
    if sentence in text or text in sentence:
        return True
    return bool(own) and len(own & set(tokens(sentence))) / len(own) >= _RELATED_SHARE


def _dropped_markers(text: str, sentence: str) -> list[tuple[str, str]]:
    kept = normalize(text)
    return [
        (kind, match.group())
        for kind, pattern in _MARKERS.items()
        for match in pattern.finditer(sentence)
        if normalize(match.group()) not in kept
    ]


def _abstract_problems(abstract: str, stage: Stage) -> list[str]:
    claims = {
        _identity(sentence): sentence
        for sentence in split_sentences(abstract)
        if _COMPLETION_CLAIM.search(sentence) and not _PENDING.search(sentence)
    }
    for message in stage.messages:
        if not claims:
            break
        for sentence in split_sentences(message.content):
            if not _PENDING.search(sentence):
                claims.pop(_identity(sentence), None)
    return [
        f"abstract claims completion in {sentence!r}, which the stage does not state without an unfinished state"
        for sentence in claims.values()
    ]
