""""Don't remember this" forgets at once (issue 23, item 4): the forgetting a user asks for in a message.

A message asking *not* to remember something ("Don't remember that I live in Berlin", "别记住我住在成都") is an
instruction, never a fact: the gates refuse what it names (``forget_instruction``), and the user's existing
memory saying the same is deleted through the deletion barrier, as the user, like ``DELETE /memories/{id}``:
one deletion request per memory, its id derived from the message's event id (server-made, so nobody else can
predict or squat it), so a replay finds the same job.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.scope import ScopeType
from memory.enums import Space
from memory.identity.auth import PrincipalContext
from memory.models import DeletionJob, Memory
from memory.sessions.dedupe import Decision, decide, serialize_owner
from memory.sessions.extraction.attribution import forget_requests
from memory.sessions.extraction.base import Candidate
from memory.sessions.extraction.gates import apply_gates
from memory.sessions.extraction.rules import RulesExtractor
from memory.sessions.messages import MessageRole, Stage, StageMessage
from memory.store.events import request_digest
from memory.text import normalize

_RULES = RulesExtractor()


def _saying(session: Session, principal: PrincipalContext, candidate: Candidate) -> Memory | None:
    """The user's own memory that says what ``candidate`` says (the same content, a near duplicate, or the same
    slot with the same value), or None; a memory of someone else's or a shared one is never touched."""
    decided = decide(session, principal, candidate)
    target = decided.target
    if target is None or target.space != Space.USER.value or target.owner_id != principal.user_id:
        return None
    if decided.decision is Decision.SKIP or decided.reason == "stated_now":
        return target
    same_value = candidate.value is not None and normalize(candidate.value) in normalize(target.content)
    return target if decided.reason == "same_key" and same_value else None


def forget_now(
    session: Session, principal: PrincipalContext, messages: Sequence[StageMessage],
    admit: Callable[[int], None] = lambda count: None,
) -> list[DeletionJob]:
    """Request the deletion of each of the user's memories a message asks not to remember; the jobs (a replayed
    message's jobs are the ones its first delivery started).

    ``admit`` is told how many new deletions the messages start before any is requested, and may refuse them
    all by raising (the caller's deletion start budget: each is a workflow, as a ``DELETE`` is)."""
    jobs: list[DeletionJob] = []
    new: list[tuple[str, uuid.UUID]] = []
    for message in messages:
        if message.role is not MessageRole.USER or message.context_refs:
            continue
        asked = forget_requests(message.content)
        if not asked:
            continue
        prefix = f"forget-{message.event_id}-"
        earlier = session.execute(
            select(DeletionJob).where(DeletionJob.tenant_id == principal.tenant_id,
                                      DeletionJob.deletion_request_id.startswith(prefix, autoescape=True))
        ).scalars().all()
        if earlier:
            jobs.extend(earlier)
            continue
        serialize_owner(session, principal)
        targets: dict[uuid.UUID, None] = {}
        for text in asked:
            stage = Stage("forget", (replace(message, content=text),))
            for candidate in apply_gates(stage, _RULES.extract(stage)).admitted:
                target = _saying(session, principal, candidate)
                if target is not None:
                    targets.setdefault(target.memory_id)
        new += [(f"{prefix}{memory_id}", memory_id) for memory_id in targets]
    if new:
        admit(len(new))
    for request_id, memory_id in new:
        scope = {"type": ScopeType.MEMORY.value, "memory_id": str(memory_id)}
        digest = request_digest({"deletion_request_id": request_id, "scope": scope})
        jobs.append(request_deletion(session, principal, request_id,
                                     ScopeRequest(ScopeType.MEMORY, memory_id=memory_id), digest).job)
    return jobs


__all__ = ["forget_now"]
