"""A session's messages as the pure parts of the pipeline see them (window, state, summary, extraction).

The store keeps each message as a ``memory_events`` row (kind MESSAGE or TOOL_RESULT) with a per-session
``sequence_no``; :func:`memory.sessions.store.stage_messages` reads them into these values, so the window,
the summarizer and the extractors are plain functions of a tuple of :class:`StageMessage`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from memory.skills.executions import SkillExecution


class MessageRole(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


@dataclass(frozen=True)
class ToolCall:
    """One call an assistant message makes; a later ``tool`` message answers it by ``call_id``."""

    call_id: str
    name: str
    arguments: str = "{}"
    """The call's arguments as the model wrote them (JSON text), kept verbatim."""


@dataclass(frozen=True)
class StageMessage:
    event_id: str
    """The ``memory_events`` row's id: what evidence refs (``event:<id>``) and summary items cite."""
    sequence_no: int
    """1, 2, 3 ... within the session, in the order the messages were stored."""
    role: MessageRole
    content: str
    created_at: datetime
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    """Set on ``tool`` messages: the ``call_id`` of the earlier assistant call this result answers."""
    context_refs: tuple[str, ...] = ()
    """Refs (``memory:<uuid>``) of recalled context this message carries: a bundle or a profile injection
    handed to the agent. Such text is cited, never extracted again as a new memory."""
    skill_execution: SkillExecution | None = None
    """The skill run this message reports, as verified when it was posted (an agent's message only)."""

    @property
    def evidence_ref(self) -> str:
        return f"event:{self.event_id}"


@dataclass(frozen=True)
class Stage:
    """What one commit covers: the session's messages from ``from_sequence`` to ``to_sequence``."""

    session_id: str
    messages: tuple[StageMessage, ...]

    @property
    def from_sequence(self) -> int:
        return self.messages[0].sequence_no if self.messages else 0

    @property
    def to_sequence(self) -> int:
        return self.messages[-1].sequence_no if self.messages else 0

    def event_ids(self) -> frozenset[str]:
        return frozenset(m.event_id for m in self.messages)
