"""E3 preferences: a temporary choice the user made in enough sessions is a stable preference (seed 003 §6.2).

Each commit records the choices its stage's user messages make; the persist step proposes, beside the
extractor's candidates, the choices of this stage that reach :data:`STABLE_CHOICE_SESSIONS` sessions.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.enums import Category, SourceLevel
from memory.models import MemoryEvent
from memory.sessions.constraints import temporary_constraints
from memory.sessions.extraction.base import Candidate
from memory.sessions.messages import MessageRole, Stage
from memory.sessions.models import ChatSession, SessionChoice
from memory.sessions.store import message_live

STABLE_CHOICE_SESSIONS = 3
"""Seed 003 §6.2 E3: the same choice in this many sessions is a stable preference."""


def _chosen(role: str, context_refs: Sequence[str], content: str) -> dict[str, str]:
    """The temporary choices a message makes: only a user's own words (recalled context chooses nothing)."""
    if role != MessageRole.USER.value or context_refs:
        return {}
    return temporary_constraints(content)


def record_choices(session: Session, chat: ChatSession, stage: Stage) -> None:
    """Remember each temporary constraint a user message of the stage chose (for E3)."""
    for message in stage.messages:
        for key, value in _chosen(message.role.value, message.context_refs, message.content).items():
            session.execute(insert(SessionChoice).values(
                tenant_id=chat.tenant_id, event_id=uuid.UUID(message.event_id), choice_key=key,
                user_id=chat.user_id, session_id=chat.session_id, choice_value=value,
            ).on_conflict_do_nothing())


def stable_choices(session: Session, chat: ChatSession, stage: Stage) -> list[Candidate]:
    """E3 preferences: a choice of this stage that the user made in :data:`STABLE_CHOICE_SESSIONS` sessions.

    Each counted choice is judged again from its message as it stands now (a user's, not recalled, not
    deleted, and still naming that choice by today's rules): a row recorded by an older reading ("这次不要用
    英文" once read as English) or of a message deleted since never counts toward a stable preference."""
    chosen = {(key, value) for m in stage.messages
              for key, value in _chosen(m.role.value, m.context_refs, m.content).items()}
    found: list[Candidate] = []
    for key, value in sorted(chosen):
        first_event: dict[str, str] = {}
        for session_id, event_id, payload in session.execute(
            select(SessionChoice.session_id, SessionChoice.event_id, MemoryEvent.payload)
            .join(MemoryEvent, (MemoryEvent.tenant_id == SessionChoice.tenant_id)
                  & (MemoryEvent.event_id == SessionChoice.event_id))
            .where(SessionChoice.tenant_id == chat.tenant_id, SessionChoice.user_id == chat.user_id,
                   SessionChoice.choice_key == key, SessionChoice.choice_value == value,
                   message_live())
            .order_by(SessionChoice.session_id, SessionChoice.event_id)
        ):
            if _still_chooses(payload, key, value):
                first_event.setdefault(session_id, str(event_id))
        if len(first_event) < STABLE_CHOICE_SESSIONS:
            continue
        rows = list(first_event.values())
        statement = f"{key} = {value} (chosen in {len(rows)} sessions)"
        found.append(Candidate(
            category=Category.PREFERENCE, abstract=statement, overview=f"PREFERENCE {key} = {value}\nsource: stable "
            f"choice in {len(rows)} sessions", content=statement, source_level=SourceLevel.E3,
            evidence_event_ids=tuple(rows), key=key, value=value,
        ))
    return found


def _still_chooses(payload: dict[str, Any], key: str, value: str) -> bool:
    """Does this stored message, read today, make the choice (key, value) for its session?"""
    chosen = _chosen(str(payload.get("role")), payload.get("context_refs") or (), str(payload.get("content", "")))
    return chosen.get(key) == value
