"""The context window (seed 003 §4.1): a token budget filled by priority, not "the last 20 turns".

P0 the current request, system messages (safety rules), the messages holding pending questions and the
profile injection; P1 the task state, the last :data:`RECENT_TOOL_EXCHANGES` tool exchanges and user
corrections; P2 decisions, the last :data:`RECENT_USER_TURNS` turns and older messages that share a search
term with the current request; P3 chit-chat, repeats and old topics (older messages sharing none).

The budget is filled by priority, then recency (newest first), skipping what no longer fits, except that the
current request comes first within P0 and that once a P0 claim does not fit nothing of lower priority is
filled in its place (a window of small talk without its request would mislead the model); the answer lists
messages in sequence order. A tool call and its results are one unit, kept or dropped whole, and so are an
assistant's question and the acknowledgement answering it ("ok" is consent, not chit-chat); a large tool
result enters as its artifact reference and a digest, never in full. The state section is counted as
rendered, and names a correction or pending question left out of the window by reference only. Every count
is :func:`memory.tokens.count_tokens`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from memory.enums import Category
from memory.sessions.messages import MessageRole, StageMessage
from memory.sessions.state import SessionState, asks, require_sequence_order
from memory.sessions.summary import DECISIONS, is_chit_chat
from memory.text import lexemes, normalize, search_terms
from memory.tokens import MESSAGE_OVERHEAD, count_tokens

RECENT_TOOL_EXCHANGES = 3
"""The newest tool exchanges (a call and its results) that are P1; older ones are history."""
RECENT_USER_TURNS = 3
"""Messages from the third-last user message on are recent history (P2) whatever their topic."""
LARGE_TOOL_RESULT_TOKENS = 400
"""A tool result longer than this enters as its artifact reference and a digest."""
DIGEST_TOKENS = 40
DIGEST_MAX_CHARS = 240
"""A digest also stops here, so one endless "word" (base64, a minified blob) cannot fill it."""
CUT_MARK = " …"

WindowSection = Literal["message", "profile", "state"]


class Priority(StrEnum):
    P0 = "P0"
    P1 = "P1"
    P2 = "P2"
    P3 = "P3"


class DropReason(StrEnum):
    OVER_BUDGET = "over_budget"
    PAIR_OVER_BUDGET = "pair_over_budget"
    """Dropped with its partner(s): a tool call and its results, or a question and the acknowledgement answering
    it, did not fit together."""
    P0_INCOMPLETE = "p0_incomplete"
    """Not filled in: a P0 claim (the request, a safety rule, a pending question, the profile) did not fit, and
    nothing of lower priority takes its place."""


class UnpairedToolResultError(ValueError):
    """A ``tool`` message must answer a call an earlier assistant message made (the store refuses others)."""


@dataclass(frozen=True)
class ProfileEntry:
    """One memory of the latest profile snapshot, injected as its own section (not a history hit)."""

    memory_id: str
    version: int
    category: Category
    key: str | None
    content: str
    source_id: str
    captured_at: datetime

    @property
    def tokens(self) -> int:
        return count_tokens(self.content)

    def as_json(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "version": self.version,
            "category": self.category.value,
            "key": self.key,
            "content": self.content,
            "source_id": self.source_id,
            "captured_at": self.captured_at.isoformat(),
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class WindowMessage:
    message: StageMessage
    priority: Priority
    content: str
    """The message's text, or for a large tool result its digest and artifact reference."""
    tokens: int
    artifact_ref: str | None = None
    digest: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "event_id": self.message.event_id,
            "sequence_no": self.message.sequence_no,
            "role": self.message.role.value,
            "content": self.content,
            "priority": self.priority.value,
            "tokens": self.tokens,
        }
        if self.message.tool_calls:
            out["tool_calls"] = [
                {"id": call.call_id, "name": call.name, "arguments": call.arguments}
                for call in self.message.tool_calls
            ]
        if self.message.tool_call_id is not None:
            out["tool_call_id"] = self.message.tool_call_id
        if self.artifact_ref is not None:
            out["artifact_ref"] = self.artifact_ref
            out["digest"] = self.digest
        return out


@dataclass(frozen=True)
class Dropped:
    section: WindowSection
    priority: Priority
    reason: DropReason
    sequence_no: int | None = None
    memory_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "section": self.section,
            "sequence_no": self.sequence_no,
            "priority": self.priority.value,
            "reason": self.reason.value,
        }
        if self.memory_id is not None:
            out["memory_id"] = self.memory_id
        return out


@dataclass(frozen=True)
class Window:
    messages: tuple[WindowMessage, ...]
    profile: tuple[ProfileEntry, ...]
    state: dict[str, Any]
    """The state section as handed to the model: the active task, entities and temporary constraints, and
    ``{"sequence_no", "event_id"}`` of each correction or pending question whose message is not in the window
    (never their text: a kept message is not repeated, a dropped one is not smuggled in). Keys without a value
    are left out; ``{}`` when there is nothing or it did not fit."""
    state_tokens: int
    """What :attr:`state` costs as rendered (compact JSON); 0 when it is empty."""
    dropped: tuple[Dropped, ...]
    budget_tokens: int

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.messages) + sum(entry.tokens for entry in self.profile) + self.state_tokens

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": [m.as_json() for m in self.messages],
            "profile": [entry.as_json() for entry in self.profile],
            "tokens": self.tokens,
            "budget_tokens": self.budget_tokens,
            "dropped": [d.as_json() for d in self.dropped],
            "state": dict(self.state),
            "state_tokens": self.state_tokens,
        }


@dataclass(frozen=True)
class _Claim:
    """One thing competing for the budget: a unit of messages, a profile entry or the state section."""

    section: WindowSection
    priority: Priority
    order: tuple[int, float]
    """Within a priority: its rank (:data:`_RANKS`), then newest first."""
    tokens: int
    members: tuple[WindowMessage, ...] = ()
    profile_index: int | None = None


_RANKS = {"request": 0, "correction": 1, "state": 2, "message": 3, "profile": 4}
"""The current request first; corrections before the state, so the state knows which of them it must name."""


def build_window(
    messages: Sequence[StageMessage],
    *,
    budget_tokens: int,
    state: SessionState,
    profile: Sequence[ProfileEntry] = (),
    large_tool_result_tokens: int = LARGE_TOOL_RESULT_TOKENS,
) -> Window:
    """The window of ``messages`` within ``budget_tokens``; what does not fit is listed in ``dropped``."""
    if budget_tokens < 1:
        raise ValueError(f"budget_tokens must be at least 1, not {budget_tokens}")
    if large_tool_result_tokens < 1:
        raise ValueError(f"large_tool_result_tokens must be at least 1, not {large_tool_result_tokens}")
    require_sequence_order(messages)
    claims = [*_message_claims(messages, state, large_tool_result_tokens), *_profile_claims(profile)]
    if _state_section(state, present=()):
        claims.append(_Claim("state", Priority.P1, (_RANKS["state"], 0.0), 0))

    kept: list[_Claim] = []
    dropped: list[Dropped] = []
    section: dict[str, Any] = {}
    remaining = budget_tokens
    p0_incomplete = False
    for claim in sorted(claims, key=lambda c: (c.priority, c.order)):
        if p0_incomplete and claim.priority is not Priority.P0:
            dropped.extend(_dropped(claim, profile, DropReason.P0_INCOMPLETE))
            continue
        if claim.section == "state":  # decided after P0 and the corrections: the messages it must name are known
            section = _state_section(state, present={m.message.sequence_no for c in kept for m in c.members})
            claim = replace(claim, tokens=_section_tokens(section))
        if claim.tokens <= remaining:
            kept.append(claim)
            remaining -= claim.tokens
        else:
            p0_incomplete = p0_incomplete or claim.priority is Priority.P0
            dropped.extend(_dropped(claim, profile))
    kept_profile = {c.profile_index for c in kept if c.section == "profile"}
    state_kept = any(c.section == "state" for c in kept)
    return Window(
        messages=tuple(sorted((m for c in kept for m in c.members), key=lambda m: m.message.sequence_no)),
        profile=tuple(entry for index, entry in enumerate(profile) if index in kept_profile),
        state=section if state_kept else {},
        state_tokens=_section_tokens(section) if state_kept else 0,
        dropped=tuple(sorted(dropped, key=_dropped_order)),
        budget_tokens=budget_tokens,
    )


def _message_claims(
    messages: Sequence[StageMessage], state: SessionState, large_tool_result_tokens: int
) -> Iterator[_Claim]:
    units = _units(messages)
    exchanges = sorted(head for head, members in units.items() if members[0].tool_calls)
    recent_exchanges = set(exchanges[-RECENT_TOOL_EXCHANGES:])
    priority_of = _ranker(messages, state)
    current = _current_request(messages)
    corrections = {c.sequence_no for c in state.corrections}
    for head, members in units.items():
        unit_priority = min(priority_of(m) for m in members)
        if head in recent_exchanges:
            unit_priority = min(unit_priority, Priority.P1)
        rendered = tuple(_rendered(m, unit_priority, large_tool_result_tokens) for m in members)
        numbers = {m.sequence_no for m in members}
        rank = "request" if current in numbers else "correction" if numbers & corrections else "message"
        yield _Claim(
            section="message",
            priority=unit_priority,
            order=(_RANKS[rank], -float(members[-1].sequence_no)),
            tokens=sum(m.tokens for m in rendered),
            members=rendered,
        )


def _units(messages: Sequence[StageMessage]) -> dict[int, list[StageMessage]]:
    """Messages grouped by the sequence_no of their unit's head: a tool call's results join the call, and a
    user's acknowledgement right after an assistant's question joins the question."""
    caller: dict[str, int] = {}
    head_of: dict[int, int] = {}
    units: dict[int, list[StageMessage]] = {}
    previous: StageMessage | None = None
    for message in messages:
        head = message.sequence_no
        if previous is not None and _answers(message, previous):
            head = head_of[previous.sequence_no]
        if message.role is MessageRole.TOOL:
            if message.tool_call_id is None or message.tool_call_id not in caller:
                raise UnpairedToolResultError(
                    f"tool message {message.event_id} (sequence_no {message.sequence_no}) answers "
                    f"{message.tool_call_id!r}, which no earlier assistant message called"
                )
            head = caller[message.tool_call_id]
        for call in message.tool_calls:
            caller[call.call_id] = message.sequence_no
        units.setdefault(head, []).append(message)
        head_of[message.sequence_no] = head
        previous = message
    return units


def _answers(message: StageMessage, previous: StageMessage) -> bool:
    """Is ``message`` a user's bare acknowledgement ("ok", "好的") of the question ``previous`` asked?"""
    return (
        message.role is MessageRole.USER
        and previous.role is MessageRole.ASSISTANT
        and is_chit_chat(message.content)
        and asks(previous.content)
    )


def _current_request(messages: Sequence[StageMessage]) -> int | None:
    """The sequence_no of the last user message: the request the window is built to answer."""
    users = [m.sequence_no for m in messages if m.role is MessageRole.USER]
    return users[-1] if users else None


def _ranker(messages: Sequence[StageMessage], state: SessionState) -> Callable[[StageMessage], Priority]:
    """A function giving each message its own priority (before its tool partners are considered)."""
    users = [m for m in messages if m.role is MessageRole.USER]
    current = users[-1] if users else None
    recent_from = users[-RECENT_USER_TURNS].sequence_no if len(users) >= RECENT_USER_TURNS else 0
    request_terms = set(search_terms(current.content)) if current is not None else set()
    pending = {q.sequence_no for q in state.pending_questions}
    corrections = {c.sequence_no for c in state.corrections}
    repeats = _repeats(messages)

    def priority_of(message: StageMessage) -> Priority:
        seq = message.sequence_no
        if message.role is MessageRole.SYSTEM or seq in pending or (current is not None and seq == current.sequence_no):
            return Priority.P0
        if seq in corrections:
            return Priority.P1
        if seq in repeats or (message.role is not MessageRole.TOOL and is_chit_chat(message.content)):
            return Priority.P3
        if seq >= recent_from or DECISIONS.search(message.content) or request_terms & set(lexemes(message.content)):
            return Priority.P2
        return Priority.P3

    return priority_of


def _repeats(messages: Sequence[StageMessage]) -> set[int]:
    """Sequence numbers of messages whose normalised content an earlier message already had."""
    seen: set[str] = set()
    out: set[int] = set()
    for message in messages:
        identity = " ".join(normalize(message.content).split())
        if not identity:
            continue
        if identity in seen:
            out.add(message.sequence_no)
        seen.add(identity)
    return out


def rendered_tokens(message: StageMessage, large_tool_result_tokens: int = LARGE_TOOL_RESULT_TOKENS) -> int:
    """What ``message`` costs in a window (a large tool result as its digest), whatever its priority."""
    return _rendered(message, Priority.P3, large_tool_result_tokens).tokens


def _rendered(message: StageMessage, priority: Priority, large_tool_result_tokens: int) -> WindowMessage:
    calls = sum(count_tokens(f"{call.name} {call.arguments}") for call in message.tool_calls)
    full = count_tokens(message.content)
    if message.role is not MessageRole.TOOL or full <= large_tool_result_tokens:
        return WindowMessage(message, priority, message.content, full + calls)
    digest = _digest(message.content)
    content = f"{digest}\n[full result: {message.evidence_ref}]"
    return WindowMessage(message, priority, content, count_tokens(content), message.evidence_ref, digest)


def _digest(text: str) -> str:
    """The longest start of ``text`` within :data:`DIGEST_TOKENS` that ends at a word or CJK character, marked
    as cut; a first word longer than :data:`DIGEST_MAX_CHARS` is cut at that character."""
    end = 0
    for cut in _cut_points(text):
        if cut > DIGEST_MAX_CHARS or count_tokens(text[:cut]) > DIGEST_TOKENS + MESSAGE_OVERHEAD:
            break
        end = cut
    return text[: end or DIGEST_MAX_CHARS].rstrip() + CUT_MARK


def _cut_points(text: str) -> Iterator[int]:
    """Offsets where a cut splits no word: after a CJK character, a space or a mark, or at a word's end."""
    for offset, char in enumerate(text, start=1):
        following = text[offset] if offset < len(text) else " "
        if _is_cjk(char) or not _is_word(char) or not _is_word(following):
            yield offset


def _is_word(char: str) -> bool:
    return (char.isalnum() or char == "_") and not _is_cjk(char)


def _is_cjk(char: str) -> bool:
    return "\u3040" <= char <= "\u30ff" or "\u3400" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af"


def _profile_claims(profile: Sequence[ProfileEntry]) -> Iterator[_Claim]:
    for index, entry in enumerate(profile):
        yield _Claim("profile", Priority.P0, (2, -entry.captured_at.timestamp()), entry.tokens, profile_index=index)


def _state_section(state: SessionState, *, present: Collection[int]) -> dict[str, Any]:
    """The state as the window hands it, given the sequence numbers of the messages ``present`` in it."""
    absent = [
        (name, [{"sequence_no": m.sequence_no, "event_id": m.event_id} for m in marked if m.sequence_no not in present])
        for name, marked in (("pending_questions", state.pending_questions), ("corrections", state.corrections))
    ]
    return {
        key: value
        for key, value in (
            ("active_task_id", state.active_task_id),
            ("active_entities", dict(state.active_entities)),
            ("temporary_constraints", dict(state.temporary_constraints)),
            *absent,
        )
        if value
    }


def _section_tokens(section: dict[str, Any]) -> int:
    """What the state section costs rendered as compact JSON; nothing when it is empty."""
    if not section:
        return 0
    return count_tokens(json.dumps(section, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def _dropped(claim: _Claim, profile: Sequence[ProfileEntry], reason: DropReason | None = None) -> Iterator[Dropped]:
    """``reason`` None: the claim did not fit (alone or with its partners)."""
    if claim.profile_index is not None:
        memory_id = profile[claim.profile_index].memory_id
        yield Dropped("profile", claim.priority, reason or DropReason.OVER_BUDGET, memory_id=memory_id)
    elif claim.section == "state":
        yield Dropped("state", claim.priority, reason or DropReason.OVER_BUDGET)
    else:
        if reason is None:
            reason = DropReason.PAIR_OVER_BUDGET if len(claim.members) > 1 else DropReason.OVER_BUDGET
        for member in claim.members:
            yield Dropped("message", claim.priority, reason, sequence_no=member.message.sequence_no)


def _dropped_order(dropped: Dropped) -> tuple[int, int]:
    return ("message", "profile", "state").index(dropped.section), dropped.sequence_no or 0
