"""A session's derived state (seed 003 §4): what is live right now, read again from the messages each time.

The raw messages stay the record; the state is a view of them, so it needs no storage and cannot drift.
Recalled context (messages carrying ``context_refs``) is left out: text a bundle or a profile injection
handed the agent is the past speaking, not this session.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from memory.sessions.constraints import temporary_constraints
from memory.sessions.messages import MessageRole, StageMessage

_MONTH_NAMES = {name.casefold(): number for number, name in enumerate(calendar.month_name) if name} | {
    name.casefold(): number for number, name in enumerate(calendar.month_abbr) if name
}
_MONTH_WORD = "|".join(sorted(_MONTH_NAMES, key=len, reverse=True))

_ISO = re.compile(r"(?<![\d-])(\d{4})-(\d{1,2})(?:-(\d{1,2}))?(?![\d-])")
_CHINESE = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月(?:\s*(\d{1,2})\s*[日号])?")
_ENGLISH_MONTH_FIRST = re.compile(rf"\b({_MONTH_WORD})\.?(?:\s+(\d{{1,2}})(?:st|nd|rd|th)?,?)?\s+(\d{{4}})\b", re.I)
_ENGLISH_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_WORD})\.?,?\s+(\d{{4}})\b", re.I)
_TASK_ID = re.compile(r"\btask-[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?")

_CLOSING = "\"'\u201d\u2019」』）)]】 \t\r\n"
_CONFIRM = re.compile(
    r"请确认|确认一下|是否确认|可以吗|行吗|好吗|对吗|"
    r"\bplease confirm\b|\bcan you confirm\b|\bconfirm (?:whether|that|if)\b|\blet me know (?:whether|if)\b",
    re.IGNORECASE,
)
_CORRECTION = re.compile(
    r"其实|不对|不是.{0,20}?而是|更正|纠正|说错了|搞错了|记错了|"
    r"\bactually\b|\bcorrection\b|\bi meant\b|\bthat'?s (?:wrong|not right|incorrect)\b|\bscratch that\b|^\s*no[,，]",
    re.IGNORECASE,
)


class SequenceOrderError(ValueError):
    """Messages must come in strictly increasing ``sequence_no``: the store's order, never re-sorted here."""


@dataclass(frozen=True)
class PendingQuestion:
    """An assistant message that asks something the user has not answered yet (no user message after it)."""

    sequence_no: int
    event_id: str
    text: str


@dataclass(frozen=True)
class Correction:
    """A user message that corrects something said before ("其实…", "actually", "不对")."""

    sequence_no: int
    event_id: str
    text: str


@dataclass(frozen=True)
class SessionState:
    active_task_id: str | None
    active_entities: dict[str, str]
    """``month`` (``2026-06``), ``date`` (``2026-06-15``) and ``task_id``: the latest mention of each."""
    temporary_constraints: dict[str, str]
    """Preferences set "this time" by the user, by key; a later one for a key replaces an earlier one."""
    pending_questions: tuple[PendingQuestion, ...]
    corrections: tuple[Correction, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "active_task_id": self.active_task_id,
            "active_entities": dict(self.active_entities),
            "temporary_constraints": dict(self.temporary_constraints),
            "pending_questions": [_marked(q.sequence_no, q.event_id, q.text) for q in self.pending_questions],
            "corrections": [_marked(c.sequence_no, c.event_id, c.text) for c in self.corrections],
        }


def _marked(sequence_no: int, event_id: str, text: str) -> dict[str, Any]:
    return {"sequence_no": sequence_no, "event_id": event_id, "text": text}


def require_sequence_order(messages: Iterable[StageMessage]) -> None:
    """Raise :class:`SequenceOrderError` unless ``sequence_no`` strictly increases."""
    previous: int | None = None
    for message in messages:
        if previous is not None and message.sequence_no <= previous:
            raise SequenceOrderError(
                f"message {message.event_id} has sequence_no {message.sequence_no} after {previous}: "
                "messages must be in strictly increasing sequence order"
            )
        previous = message.sequence_no


def derive_state(messages: Sequence[StageMessage], *, task_id: str | None = None) -> SessionState:
    """The state of a session after ``messages``; ``task_id`` is the session's own task, which wins over any
    task a message mentions (a mention is an entity, the session's task is what it works on)."""
    require_sequence_order(messages)
    own = [m for m in messages if not m.context_refs]
    entities: dict[str, str] = {}
    constraints: dict[str, str] = {}
    for message in own:
        if message.role in (MessageRole.USER, MessageRole.ASSISTANT):
            entities.update(_entities_in(message.content))
        if message.role is MessageRole.USER:
            constraints.update(temporary_constraints(message.content))
    return SessionState(
        active_task_id=task_id if task_id is not None else entities.get("task_id"),
        active_entities=entities,
        temporary_constraints=constraints,
        pending_questions=_pending_questions(own),
        corrections=tuple(
            Correction(m.sequence_no, m.event_id, m.content.strip())
            for m in own
            if m.role is MessageRole.USER and _CORRECTION.search(m.content)
        ),
    )


def _entities_in(text: str) -> dict[str, str]:
    """Months, dates and task ids ``text`` mentions; the last mention of a kind wins, and a mention inside a
    longer one ("August 2026" in "15 August 2026") is part of it, not a second mention."""
    found: list[tuple[int, int, str, str]] = []
    patterns = ((_ISO, "ymd"), (_CHINESE, "ymd"), (_ENGLISH_MONTH_FIRST, "mdy"), (_ENGLISH_DAY_FIRST, "dmy"))
    for pattern, order in patterns:
        for match in pattern.finditer(text):
            entity = _calendar_entity(match.groups(), order)
            if entity is not None:
                found.append((match.start(), -match.end(), *entity))
    found.extend((match.start(), -match.end(), "task_id", match.group()) for match in _TASK_ID.finditer(text))
    entities: dict[str, str] = {}
    covered_to = 0
    for start, negative_end, kind, value in sorted(found):
        if start >= covered_to:
            entities[kind] = value
            covered_to = -negative_end
    return entities


def _calendar_entity(groups: Sequence[str | None], order: str) -> tuple[str, str] | None:
    """``("month", "2026-06")`` or ``("date", "2026-06-15")``; ``None`` for what is no real month or day."""
    parts = dict(zip(order, groups, strict=True))
    year_text, month_text, day_text = parts["y"], parts["m"], parts["d"]
    if year_text is None or month_text is None:
        return None
    month = int(month_text) if month_text.isdigit() else _MONTH_NAMES[month_text.casefold()]
    year = int(year_text)
    if not 1 <= month <= 12:
        return None
    if day_text is None:
        return "month", f"{year:04d}-{month:02d}"
    try:
        return "date", date(year, month, int(day_text)).isoformat()
    except ValueError:
        return None


def _pending_questions(messages: Sequence[StageMessage]) -> tuple[PendingQuestion, ...]:
    after_last_user: list[StageMessage] = []
    for message in messages:
        if message.role is MessageRole.USER:
            after_last_user = []
        else:
            after_last_user.append(message)
    return tuple(
        PendingQuestion(m.sequence_no, m.event_id, m.content.strip())
        for m in after_last_user
        if m.role is MessageRole.ASSISTANT and asks(m.content)
    )


def asks(text: str) -> bool:
    """Does ``text`` end in a question mark or ask for a confirmation?"""
    return text.rstrip(_CLOSING).endswith(("?", "？")) or _CONFIRM.search(text) is not None
