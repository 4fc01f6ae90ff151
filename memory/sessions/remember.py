""""Remember this" (E1) is written when the message arrives, not held until a commit (issue 14, item 4).

A user message that asks in so many words to remember something goes through the same rules extractor,
gates and de-duplication as a commit, in the transaction that stores the message; a later commit of the
stage finds the memory and skips it as the same content. A replayed message reports the memory its first
delivery wrote (found by the write's idempotency key), so a replay answers the first result. "Don't remember
this" is forgetting: :mod:`memory.deletion.instructed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.enums import SourceLevel
from memory.identity.auth import PrincipalContext
from memory.models import Memory
from memory.sessions.dedupe import decide, serialize_owner
from memory.sessions.extraction.gates import apply_gates
from memory.sessions.extraction.rules import RulesExtractor, is_remember_request
from memory.sessions.messages import MessageRole, Stage, StageMessage
from memory.sessions.models import ChatSession
from memory.sessions.persist import write_decision

_RULES = RulesExtractor()


def _key(message: StageMessage, position: int) -> str:
    return f"session-remember:{message.event_id}:{position}"


def remember_now(
    session: Session, principal: PrincipalContext, chat: ChatSession, messages: Sequence[StageMessage]
) -> list[dict[str, Any]]:
    """Write the E1 memories ``messages`` ask for; what was written (or found written before), per memory."""
    written: list[dict[str, Any]] = []
    for message in messages:
        if message.role is not MessageRole.USER or message.context_refs or not is_remember_request(message.content):
            continue
        serialize_owner(session, principal)
        stage = Stage(chat.session_id, (message,))
        gated = apply_gates(stage, _RULES.extract(stage))
        for position, candidate in enumerate(c for c in gated.admitted if c.source_level is SourceLevel.E1):
            earlier = session.execute(
                select(Memory).where(Memory.tenant_id == principal.tenant_id,
                                     Memory.idempotency_key == _key(message, position))
            ).scalar_one_or_none()
            if earlier is not None:
                written.append({"memory_id": str(earlier.memory_id), "version": earlier.version,
                                "category": earlier.category, "key": earlier.key, "status": earlier.status,
                                "decision": "CREATE", "evidence_refs": list(earlier.evidence_refs)})
                continue
            written.append(write_decision(
                session, principal, chat, decide(session, principal, candidate), stage, position=position,
                idempotency_key=_key(message, position), held_epoch=None,
            ))
        session.flush()
    return written
