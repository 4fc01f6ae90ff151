"""Persisting a commit's candidates through the store, in one transaction that checks the deletion epoch.

Seed 004 §8.3 steps 3-6: every admitted candidate gets its de-duplication decision
(:mod:`memory.sessions.dedupe`); CREATE is a new memory, MERGE a new version that supersedes (never an
edit), SKIP nothing. Then the session is linked to what it used and produced, the memories its bundles
and profile injection used count one more use, and the commit records its figures. The transaction
starts by checking that no deletion of the owner happened since the commit was accepted: if one did,
nothing at all is written back. A retried activity finds the commit ended and changes nothing.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.auth import PrincipalContext
from memory.enums import Category, SourceLevel
from memory.epochs import StaleEpoch
from memory.errors import Forbidden, MnemoError
from memory.events import request_digest
from memory.memories import Correction, NewMemory, Source, correct_memory, create_memory
from memory.models import Memory, MemoryEvent
from memory.recall.usage import mark_used_ids
from memory.sessions.commits import (
    TERMINAL,
    CommitStatus,
    cancelled_by_deletion,
    lock_commit,
    move,
    owner_of,
    release_stage,
)
from memory.sessions.constraints import temporary_constraints
from memory.sessions.dedupe import Decided, Decision, decide, serialize_owner, space_for, stored_content
from memory.sessions.extraction.base import Candidate, Rejection, RejectionReason, rejection_kind
from memory.sessions.messages import MessageRole, Stage
from memory.sessions.models import ChatSession, SessionChoice, SessionCommit, SessionLink
from memory.sessions.store import message_live, stage_messages
from memory.tokens import count_tokens
from memory.visibility import not_tombstoned, visible_to

STABLE_CHOICE_SESSIONS = 3
"""Seed 003 §6.2 E3: the same choice in this many sessions is a stable preference."""
UNUSABLE = frozenset({RejectionReason.INVALID_ANSWER, RejectionReason.EXTRACTOR_UNAVAILABLE})


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    return {**asdict(candidate), "category": candidate.category.value, "source_level": candidate.source_level.value,
            "evidence_event_ids": list(candidate.evidence_event_ids)}


def candidate_of(data: dict[str, Any]) -> Candidate:
    return Candidate(**{**data, "category": Category(data["category"]),
                        "source_level": SourceLevel(data["source_level"]),
                        "evidence_event_ids": tuple(data["evidence_event_ids"])})


def rejection_json(rejection: Rejection) -> dict[str, Any]:
    return {"reason": rejection.reason.value, "detail": rejection.detail,
            "evidence_event_ids": list(rejection.evidence_event_ids)}


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


def _source(chat: ChatSession, candidate: Candidate, stage: Stage) -> Source:
    cited = [m for m in stage.messages if m.event_id in set(candidate.evidence_event_ids)]
    captured: datetime = max((m.created_at for m in cited), default=stage.messages[-1].created_at)
    return Source(source_id=f"session:{chat.session_id}", source_type="SESSION_COMMIT", captured_at=captured,
                  evidence_refs=tuple(f"event:{e}" for e in candidate.evidence_event_ids))


def write_decision(
    session: Session, principal: PrincipalContext, chat: ChatSession, decided: Decided, stage: Stage, *,
    position: int, idempotency_key: str, held_epoch: int | None,
) -> dict[str, Any]:
    """Apply one decision through the store; returns what a commit's ``memories`` lists for it.

    A CREATE is idempotent by ``idempotency_key`` (a retried write finds its memory); ``held_epoch`` refuses
    it if the owner's data was deleted since the writer started."""
    candidate, target = decided.candidate, decided.target
    entry: dict[str, Any] = {"position": position, "category": candidate.category.value, "key": candidate.key,
                             "abstract": candidate.abstract, "source_level": candidate.source_level.value,
                             "evidence_refs": [f"event:{e}" for e in candidate.evidence_event_ids],
                             "decision": decided.decision.value, "reason": decided.reason}
    if decided.decision is Decision.SKIP:
        assert target is not None
        entry.update(memory_id=str(target.memory_id), version=target.version)
        return entry
    source = _source(chat, candidate, stage)
    content = stored_content(candidate)
    overview = candidate.overview if content == candidate.content else f"{candidate.overview}\n«{candidate.content}»"
    if decided.decision is Decision.MERGE:
        assert target is not None
        accumulate = decided.reason == "accumulate"
        refs = tuple(dict.fromkeys([*target.evidence_refs, *source.evidence_refs])) if accumulate else None
        try:
            merged = correct_memory(session, principal, target.memory_id, Correction(
                expected_version=target.version,
                content=None if accumulate else content,
                abstract=None if accumulate else candidate.abstract,
                overview=None if accumulate else overview,
                key=candidate.key,
                source=Source(source.source_id, source.source_type, source.captured_at, refs or source.evidence_refs),
                source_level=candidate.source_level,
            ))
        except Forbidden:
            entry["reason"] = "merge_needs_memory_writer"
        else:
            if accumulate:
                merged.occurrences = target.occurrences + 1
            entry.update(memory_id=str(merged.memory_id), version=merged.version, supersedes_version=target.version)
            return entry
    written = create_memory(session, principal, NewMemory(
        category=candidate.category, space=space_for(candidate.category), content=content,
        source=source, source_level=candidate.source_level, abstract=candidate.abstract,
        overview=overview, key=candidate.key, project_id=chat.project_id,
        idempotency_key=idempotency_key,
    ), request_digest(candidate_json(candidate)), held_epoch=held_epoch)
    entry.update(decision=Decision.CREATE.value, memory_id=str(written.memory.memory_id),
                 version=written.memory.version, status=written.memory.status)
    return entry


def _link(session: Session, chat: ChatSession, commit: SessionCommit, target: str, relation: str) -> None:
    session.execute(insert(SessionLink).values(
        tenant_id=chat.tenant_id, user_id=chat.user_id, session_id=chat.session_id, target=target, relation=relation,
        commit_id=commit.commit_id,
    ).on_conflict_do_nothing())


def _used(session: Session, principal: PrincipalContext, chat: ChatSession, stage: Stage) -> list[uuid.UUID]:
    """Memories that reached the agent in this stage: the refs its messages carry and the profile injection,
    as far as the owner may see them (a ref is the client's word: it never counts a use of someone else's)."""
    refs = [ref for m in stage.messages for ref in m.context_refs]
    refs += [f"memory:{entry['memory_id']}" for entry in chat.profile_snapshot] if stage.from_sequence == 1 else []
    named: list[uuid.UUID] = []
    for ref in dict.fromkeys(refs):
        kind, _, raw = ref.partition(":")
        try:
            if kind == "memory":
                named.append(uuid.UUID(raw))
        except ValueError:
            continue
    if not named:
        return []
    visible = set(session.execute(
        select(Memory.memory_id).where(visible_to(principal), not_tombstoned(), Memory.memory_id.in_(named))
    ).scalars())
    return [memory_id for memory_id in named if memory_id in visible]


def persist(session: Session, tenant_id: str, session_id: str, commit_id: str, user_id: str | None) -> SessionCommit:
    """Write the commit's admitted candidates back (or nothing, if its owner's data was deleted since)."""
    commit, chat = lock_commit(session, tenant_id, session_id, commit_id, user_id)
    if CommitStatus(commit.status) in TERMINAL:
        return commit
    # the session's owner, with the roles of the key that asked for the commit
    principal = owner_of(chat, commit.requester_roles, f"session-commit:{commit.commit_id}")
    if cancelled_by_deletion(session, commit, chat):
        return commit
    serialize_owner(session, principal)
    stage = Stage(session_id, stage_messages(session, chat, commit.from_sequence, commit.to_sequence))
    extracted = commit.memories.get("proposed", {})
    rejections: list[dict[str, Any]] = list(extracted.get("rejections", []))
    record_choices(session, chat, stage)
    proposed = [candidate_of(c) for c in extracted.get("candidates", [])]
    candidates = proposed + stable_choices(session, chat, stage)  # E3 cites other sessions' (live) choices
    live = set(stage.event_ids())
    entries: list[dict[str, Any]] = []
    for position, candidate in enumerate(candidates):
        if position < len(proposed) and not set(candidate.evidence_event_ids) <= live:  # deleted since extraction
            rejections.append({"reason": RejectionReason.EVIDENCE_DELETED.value,
                               "detail": "an event this candidate cites was deleted before it could be stored",
                               "evidence_event_ids": list(candidate.evidence_event_ids)})
            continue
        try:
            with session.begin_nested():  # one refused write (a rule of the store) leaves the others standing
                entries.append(write_decision(
                    session, principal, chat, decide(session, principal, candidate), stage, position=position,
                    idempotency_key=f"session-commit:{session_id}:{commit_id}:{position}",
                    held_epoch=commit.held_epoch,
                ))
        except StaleEpoch:
            raise
        except MnemoError as exc:
            rejections.append({"reason": RejectionReason.WRITE_REFUSED.value, "detail": f"{exc.code}: {exc.message}",
                               "evidence_event_ids": list(candidate.evidence_event_ids)})
    for entry in entries:
        if "memory_id" in entry and entry["decision"] != Decision.SKIP.value:
            _link(session, chat, commit, f"memory:{entry['memory_id']}", entry["decision"].lower())
    used = _used(session, principal, chat, stage)
    for memory_id in used:
        _link(session, chat, commit, f"memory:{memory_id}", "used")
    mark_used_ids(session, tenant_id, used, datetime.now().astimezone())
    counts = Counter(entry["decision"] for entry in entries)
    refused = Counter(r["reason"] for r in rejections)
    stats = {
        "messages": len(stage.messages),
        "turns": sum(1 for m in stage.messages if m.role is MessageRole.USER),
        "tokens": sum(count_tokens(m.content) for m in stage.messages),
        "contexts_used": len(used),
        "candidates": len(candidates),
        "memories_extracted": counts[Decision.CREATE.value],
        "memories_merged": counts[Decision.MERGE.value],
        "memories_skipped": counts[Decision.SKIP.value],
        "rejected": dict(sorted(refused.items())),
        "rejected_by_kind": dict(sorted(Counter(
            kind.value for r in rejections if (kind := rejection_kind(r["reason"])) is not None).items())),
        **extracted.get("usage", {}),
    }
    # The proposal (candidates' text) was only for this step: a commit row keeps ids, decisions and abstracts.
    memories = {"created": [e for e in entries if e["decision"] == Decision.CREATE.value],
                "merged": [e for e in entries if e["decision"] == Decision.MERGE.value],
                "skipped": [e for e in entries if e["decision"] == Decision.SKIP.value],
                "candidates": len(candidates)}
    if not entries and refused and set(refused) <= {r.value for r in UNUSABLE}:
        status = CommitStatus.FAILED_REQUIRES_ACTION
    elif rejections:
        status = CommitStatus.COMPLETED_WITH_REJECTIONS
    else:
        status = CommitStatus.COMPLETED
    if not candidates and not rejections:
        rejections.append({"reason": RejectionReason.NO_CANDIDATES.value,
                           "detail": "no message of the stage asked to remember, stated a preference or profile fact, "
                           "or corrected one", "evidence_event_ids": []})
    move(commit, status, memories=memories, stats=stats, reasons=rejections)
    if status is CommitStatus.FAILED_REQUIRES_ACTION:
        release_stage(session, commit)
    return commit
