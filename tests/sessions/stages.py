"""Stages built in memory for the pure parts of the pipeline (extractors, gates): the values the store reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.sessions.messages import MessageRole, Stage, StageMessage

START = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)

Said = tuple[str, str] | tuple[str, str, tuple[str, ...]]
"""(role, content) or (role, content, context_refs)."""


def stage_of(*said: Said, session_id: str = "s-1") -> Stage:
    """A stage of these messages, event ids ``e1``, ``e2`` ... in order, one minute apart."""
    messages = tuple(
        StageMessage(
            event_id=f"e{n}",
            sequence_no=n,
            role=MessageRole(item[0]),
            content=item[1],
            created_at=START + timedelta(minutes=n),
            context_refs=item[2] if len(item) == 3 else (),
        )
        for n, item in enumerate(said, start=1)
    )
    return Stage(session_id=session_id, messages=messages)
