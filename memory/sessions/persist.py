"""Persisting a commit's candidates through the store, in one transaction that checks the deletion epoch.

Seed 004 §8.3 steps 3-6: every admitted candidate gets its de-duplication decision
(:mod:`memory.sessions.dedupe`); CREATE is a new memory, MERGE a new version that supersedes (never an
edit), SKIP nothing. Then the session is linked to what it used and produced, the memories its bundles
and profile injection used count one more use, and the commit records its figures. The transaction
starts by checking that no deletion of the owner happened since the commit was accepted: if one did,
nothing at all is written back. A retried activity finds the commit ended and changes nothing. The step
itself (lock, epoch check, the commit's move) is :func:`memory.sessions.commit_steps.persist`; this module
computes and writes what it stores, in named stages.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.epochs import StaleEpoch
from memory.errors import Forbidden, MnemoError
from memory.identity.auth import PrincipalContext
from memory.knowledge.candidates import Author
from memory.knowledge.sources import propose_from_commit
from memory.models import Memory
from memory.sessions.choices import record_choices, stable_choices
from memory.sessions.commits import CommitStatus, owner_of
from memory.sessions.dedupe import Decided, Decision, decide, serialize_owner, space_for, stored_content
from memory.sessions.extraction.base import Candidate, Rejection, RejectionReason, rejection_kind
from memory.sessions.messages import MessageRole, Stage
from memory.sessions.models import ChatSession, SessionCommit, SessionLink
from memory.sessions.proposal import Proposal, Usage, candidate_json, rejection_json
from memory.sessions.store import stage_messages
from memory.store.events import request_digest
from memory.store.memories import Correction, NewMemory, Source, correct_memory, create_memory
from memory.store.usage import mark_used_ids
from memory.store.visibility import not_tombstoned, visible_to
from memory.tokens import count_tokens

UNUSABLE = frozenset({RejectionReason.INVALID_ANSWER, RejectionReason.EXTRACTOR_UNAVAILABLE})


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


@dataclass(frozen=True)
class WriteBack:
    """What persisting a proposal ends the commit with (the step moves the commit; this only computes)."""

    status: CommitStatus
    memories: dict[str, Any]
    stats: dict[str, Any]
    reasons: list[dict[str, Any]]


def write_back(session: Session, commit: SessionCommit, chat: ChatSession) -> WriteBack:
    """Write the commit's admitted candidates back, link the session, count uses; the commit's outcome.

    Called by :func:`memory.sessions.commit_steps.persist` with the commit locked and its epoch checked."""
    # the session's owner, with the roles of the key that asked for the commit
    principal = owner_of(chat, commit.requester_roles, f"session-commit:{commit.commit_id}")
    serialize_owner(session, principal)
    stage = Stage(chat.session_id, stage_messages(session, chat, commit.from_sequence, commit.to_sequence))
    proposal = Proposal.from_json(commit.memories.get("proposed", {}))
    rejections = list(proposal.rejections)
    record_choices(session, chat, stage)
    candidates = [*proposal.candidates, *stable_choices(session, chat, stage)]  # E3 cites other sessions' choices
    entries = _write_candidates(session, principal, chat, commit, stage, candidates, len(proposal.candidates),
                                rejections)
    used = _link_session(session, principal, chat, commit, stage, entries)
    proposed = propose_from_commit(session, Author(chat.tenant_id, principal.user_id, chat.agent_id), entries,
                                   chat.session_id, str(commit.commit_id), datetime.now().astimezone())
    decisions = Counter(str(entry["decision"]) for entry in entries)
    stats = {**_stats(stage, used, candidates, decisions, rejections, proposal.usage), **proposed}
    status = _status(decisions, rejections)
    if not candidates and not rejections:
        rejections.append(Rejection(RejectionReason.NO_CANDIDATES, "no message of the stage asked to remember, "
                                    "stated a preference or profile fact, or corrected one"))
    # The proposal (candidates' text) was only for this step: a commit row keeps ids, decisions and abstracts.
    memories = {"created": [e for e in entries if e["decision"] == Decision.CREATE.value],
                "merged": [e for e in entries if e["decision"] == Decision.MERGE.value],
                "skipped": [e for e in entries if e["decision"] == Decision.SKIP.value],
                "candidates": len(candidates)}
    return WriteBack(status, memories, stats, [rejection_json(r) for r in rejections])


def _write_candidates(
    session: Session, principal: PrincipalContext, chat: ChatSession, commit: SessionCommit, stage: Stage,
    candidates: Sequence[Candidate], proposed: int, rejections: list[Rejection],
) -> list[dict[str, Any]]:
    """Decide and write each candidate, each in its own savepoint; refusals are appended to ``rejections``.

    The first ``proposed`` candidates are the extractor's: one citing an event deleted since extraction is
    refused (the E3 ones after them cite other sessions' live choices)."""
    live = set(stage.event_ids())
    entries: list[dict[str, Any]] = []
    for position, candidate in enumerate(candidates):
        if position < proposed and not set(candidate.evidence_event_ids) <= live:
            rejections.append(Rejection(RejectionReason.EVIDENCE_DELETED, "an event this candidate cites was "
                                        "deleted before it could be stored", candidate.evidence_event_ids))
            continue
        try:
            with session.begin_nested():  # one refused write (a rule of the store) leaves the others standing
                entries.append(write_decision(
                    session, principal, chat, decide(session, principal, candidate), stage, position=position,
                    idempotency_key=f"session-commit:{chat.session_id}:{commit.commit_id}:{position}",
                    held_epoch=commit.held_epoch,
                ))
        except StaleEpoch:
            raise
        except MnemoError as exc:
            rejections.append(Rejection(RejectionReason.WRITE_REFUSED, f"{exc.code}: {exc.message}",
                                        candidate.evidence_event_ids))
    return entries


def _link_session(
    session: Session, principal: PrincipalContext, chat: ChatSession, commit: SessionCommit, stage: Stage,
    entries: Sequence[dict[str, Any]],
) -> list[uuid.UUID]:
    """Link the session to the memories it wrote and used, and count one use of each used one."""
    for entry in entries:
        if "memory_id" in entry and entry["decision"] != Decision.SKIP.value:
            _link(session, chat, commit, f"memory:{entry['memory_id']}", entry["decision"].lower())
    used = _used(session, principal, chat, stage)
    for memory_id in used:
        _link(session, chat, commit, f"memory:{memory_id}", "used")
    mark_used_ids(session, chat.tenant_id, used, datetime.now().astimezone())
    return used


def _stats(
    stage: Stage, used: Sequence[uuid.UUID], candidates: Sequence[Candidate], decisions: Counter[str],
    rejections: Sequence[Rejection], usage: Usage | None,
) -> dict[str, Any]:
    """The commit's figures: what the stage held, what was decided, what was refused and why."""
    refused = Counter(r.reason.value for r in rejections)
    return {
        "messages": len(stage.messages),
        "turns": sum(1 for m in stage.messages if m.role is MessageRole.USER),
        "tokens": sum(count_tokens(m.content) for m in stage.messages),
        "contexts_used": len(used),
        "candidates": len(candidates),
        "memories_extracted": decisions[Decision.CREATE.value],
        "memories_merged": decisions[Decision.MERGE.value],
        "memories_skipped": decisions[Decision.SKIP.value],
        "rejected": dict(sorted(refused.items())),
        "rejected_by_kind": dict(sorted(Counter(
            kind.value for r in rejections if (kind := rejection_kind(r.reason.value)) is not None).items())),
        **(asdict(usage) if usage is not None else {}),
    }


def _status(decisions: Counter[str], rejections: Sequence[Rejection]) -> CommitStatus:
    """Failed when nothing was decided and every refusal says the extractor's answer was unusable."""
    refused = {r.reason for r in rejections}
    if not decisions and refused and refused <= UNUSABLE:
        return CommitStatus.FAILED_REQUIRES_ACTION
    return CommitStatus.COMPLETED_WITH_REJECTIONS if rejections else CommitStatus.COMPLETED
