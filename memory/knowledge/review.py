"""Reviewing a knowledge candidate: who may decide, on what, and what each decision does.

A candidate is never knowledge until a person approves it. The reviewer holds ``knowledge_reviewer`` (or
``admin``), is not the candidate's author, and decides with a credential that is not bound to an agent: a model
can never approve its own conclusion. A decision names the content hash and ``state_version`` it was shown
(:func:`check_review`, run by the review workflow's validator and again, against the row, by the activity
that applies it). Approving re-reads the conflicts first: a conflict the reviewer was not shown refreshes the
candidate and refuses the decision (``knowledge_conflicts_changed``), so nothing is superseded unseen.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from memory.enums import Role
from memory.errors import Conflict, Forbidden, InvalidInput, VersionConflict
from memory.identity.auth import holds
from memory.knowledge.candidates import (
    OPEN_STATUSES,
    Author,
    CandidateStatus,
    check_supersedes,
    conflicts,
    duplicates,
    get_candidate,
)
from memory.knowledge.content import RANK, Authority, Origin, Proposal, capped, ceiling, content_sha256
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.knowledge.publish import Vector, lineage, publish_over
from memory.knowledge.redaction import redact_text
from memory.models import AuditEntry
from memory.tasks.reminders import Reminder, signed_message

DECISIONS = ("approve", "reject", "request_changes")
CLOSED = (CandidateStatus.APPROVED, CandidateStatus.REJECTED, CandidateStatus.WITHDRAWN, CandidateStatus.EXPIRED)
REVIEWER_NEEDED = "reviewing knowledge needs the knowledge_reviewer role"
REMINDER_EVENT = "knowledge_review_reminder"


@dataclass
class ReviewState:
    """What the review workflow knows of its candidate: ids, hash, versions and status, never its content."""

    candidate_id: str
    status: str
    content_sha256: str
    state_version: int
    author_user_id: str
    deadline_at: str


@dataclass(frozen=True)
class ReviewRequest:
    """A decision, with the identity the API read from the credential (never from the body)."""

    decision: str
    content_sha256: str
    state_version: int
    user_id: str
    roles: list[str]
    agent_id: str | None = None
    reason: str | None = None
    """Already redacted (:func:`clean_reason`): it is stored and travels through the workflow's history."""
    authority: str | None = None
    """An approval's classification of the claim, when the reviewer gives one (else the candidate's): how a
    person raises what an agent or a conversation proposed as P3, or lowers what was overclaimed."""


@dataclass(frozen=True)
class Decided:
    """What applying a decision did: the candidate (and the item it published), or refreshed conflicts."""

    candidate: KnowledgeCandidate
    item: KnowledgeItem | None = None
    conflicts_changed: bool = False


def state_of(candidate: KnowledgeCandidate, deadline_at: str = "") -> ReviewState:
    deadline = candidate.review_deadline.isoformat() if candidate.review_deadline is not None else deadline_at
    return ReviewState(str(candidate.candidate_id), candidate.status, candidate.content_sha256,
                       candidate.state_version, candidate.author_user_id, deadline)


def clean_reason(reason: str | None) -> str | None:
    """The reviewer's reason without personal data or secrets (it is stored and passed to the workflow)."""
    if reason is None or not reason.strip():
        return None
    return redact_text(reason.strip())[0]


def reviewer_refusal(user_id: str, roles: Iterable[str], agent_id: str | None, author_user_id: str | None
                     ) -> Forbidden | None:
    """Why this credential may not review this candidate (None: it may). The console shows it instead of forms."""
    if not holds(roles, Role.KNOWLEDGE_REVIEWER):
        return Forbidden(REVIEWER_NEEDED)
    if agent_id is not None:
        return Forbidden("a key bound to an agent cannot review knowledge: a person reviews with their own key",
                         code="knowledge_agent_review")
    if author_user_id is not None and user_id == author_user_id:
        return Forbidden("you proposed this candidate, so another reviewer must decide on it",
                         code="knowledge_self_review")
    return None


def check_request(request: ReviewRequest) -> None:
    """What any review must carry, whatever the candidate: a reviewer, a known decision, a reason where needed."""
    refusal = reviewer_refusal(request.user_id, request.roles, request.agent_id, None)
    if refusal is not None:
        raise refusal
    if request.decision not in DECISIONS:
        raise InvalidInput("decision must be approve, reject or request_changes", code="invalid_decision")
    if request.authority is not None and (request.decision != "approve"
                                          or request.authority not in {a.value for a in Authority}):
        raise InvalidInput("authority (P0, P1, P2 or P3) is given with an approval only", code="invalid_authority")
    if request.decision != "approve" and not (request.reason or "").strip():
        raise InvalidInput(f"{request.decision} needs a reason, so the author knows what to change",
                           code="reason_required")


RESULT = {"approve": CandidateStatus.APPROVED, "reject": CandidateStatus.REJECTED,
          "request_changes": CandidateStatus.CHANGES_REQUESTED}
"""The status each decision leaves the candidate in."""


def is_replay(candidate: ReviewState | KnowledgeCandidate, decided_by: str | None, decision: str | None,
              request: ReviewRequest) -> bool:
    """Whether ``request`` repeats the decision its own reviewer already recorded on this content, which still
    stands (a revision back to the same content waits for a new decision)."""
    return (decided_by is not None and decided_by == request.user_id and decision == request.decision
            and candidate.content_sha256 == request.content_sha256 and candidate.status == RESULT.get(decision))


def check_review(state: ReviewState, request: ReviewRequest) -> None:
    """Raise unless ``request`` may decide on the candidate as ``state`` has it now."""
    refusal = reviewer_refusal(request.user_id, request.roles, request.agent_id, state.author_user_id)
    if refusal is not None:
        raise refusal
    check_request(request)
    if state.status in CLOSED:
        raise Conflict(f"the candidate is {state.status}: it cannot be decided again",
                       code="knowledge_candidate_closed")
    if state.status != CandidateStatus.PENDING_REVIEW:
        raise Conflict(f"the candidate is {state.status}: its author revises it before it is reviewed again",
                       code="knowledge_not_pending_review")
    if request.content_sha256 != state.content_sha256:
        raise Conflict("the candidate changed since you read it: review its current content_sha256 "
                       f"({state.content_sha256})", code="knowledge_hash_mismatch",
                       details={"content_sha256": state.content_sha256})
    if request.state_version != state.state_version:
        raise Conflict(f"the candidate is at state_version {state.state_version}, not {request.state_version}: "
                       "read it again", code="knowledge_state_version_mismatch",
                       details={"state_version": state.state_version})


def _bump(candidate: KnowledgeCandidate, now: datetime) -> None:
    candidate.state_version += 1
    candidate.updated_at = now


def decide(session: Session, tenant_id: str, candidate_id: uuid.UUID, request: ReviewRequest, now: datetime,
           vector: Vector | None) -> Decided:
    """Apply ``request`` to the row (locked, checked again); approve publishes unless the conflicts changed."""
    candidate = get_candidate(session, tenant_id, candidate_id, lock=True)
    if is_replay(candidate, candidate.decided_by, candidate.decision, request):
        item = None
        if candidate.knowledge_id is not None:
            item = session.get(KnowledgeItem, (tenant_id, candidate.knowledge_id, candidate.knowledge_version))
        return Decided(candidate, item)
    check_review(state_of(candidate), request)
    if request.decision == "approve" and publishes(candidate):
        check_supersedes(session, tenant_id, candidate)  # another item may have taken its key since it opened
        current = conflicts(session, tenant_id, candidate)
        if current != candidate.conflicts:
            candidate.conflicts = current
            _bump(candidate, now)
            _audit(session, candidate, request, "KNOWLEDGE_CONFLICTS_REFRESHED")
            return Decided(candidate, conflicts_changed=True)
    candidate.decision, candidate.decision_reason = request.decision, request.reason
    candidate.decided_by, candidate.decided_at = request.user_id, now
    _audit(session, candidate, request, "KNOWLEDGE_REVIEWED")
    if request.decision == "approve" and not publishes(candidate):
        # A skill is a file a person pushes (``mnemo skills push``), and a re-review only tells reviewers that an
        # item lost its only source: approving either records the decision, and writes no skill and no knowledge.
        candidate.status = CandidateStatus.APPROVED
        _bump(candidate, now)
        session.flush()
        return Decided(candidate)
    if request.decision == "approve":
        authority = Authority(request.authority or candidate.authority)
        previous = lineage(session, candidate)
        check_no_downgrade(previous, authority)
        return Decided(candidate, publish_over(session, candidate, previous, request.user_id, now, vector, authority))
    candidate.status = (CandidateStatus.REJECTED if request.decision == "reject"
                        else CandidateStatus.CHANGES_REQUESTED)
    _bump(candidate, now)
    session.flush()
    return Decided(candidate)


def publishes(candidate: KnowledgeCandidate) -> bool:
    """Does approving it publish knowledge? Not a skill change, nor a re-review notice (it holds no claim of its
    own: a reviewer who still believes the item proposes it again with a source)."""
    return candidate.target == "knowledge" and candidate.origin != Origin.REREVIEW.value


def check_no_downgrade(previous: KnowledgeItem | None, authority: Authority) -> None:
    """A weaker claim never replaces a stronger one unseen: a P3 version would take a P0 policy out of recall. The
    reviewer approves with the authority the new version deserves, or rejects it."""
    if previous is not None and RANK[authority] > RANK[Authority(previous.authority)]:
        raise Conflict(f"approving would replace {previous.authority} knowledge (version {previous.version}) with a "
                       f"{authority.value} version: approve with the authority it deserves, or reject it",
                       code="knowledge_authority_downgrade",
                       details={"replaces_authority": previous.authority, "version": previous.version})


def _audit(session: Session, candidate: KnowledgeCandidate, request: ReviewRequest, action: str) -> None:
    session.add(AuditEntry(tenant_id=candidate.tenant_id, actor=request.user_id, action=action,
                           detail={"candidate_id": str(candidate.candidate_id), "decision": request.decision,
                                   "authority": request.authority or candidate.authority,
                                   "content_sha256": candidate.content_sha256,
                                   "state_version": candidate.state_version}))


def revise(session: Session, author: Author, candidate_id: uuid.UUID, expected_version: int, proposal: Proposal,
           now: datetime) -> KnowledgeCandidate:
    """The author's new content after ``request_changes``: redacted, hashed, duplicates and conflicts recomputed,
    ``version`` + 1, back to PENDING_REVIEW. Someone else's candidate is the same 404 as a missing one."""
    candidate = get_candidate(session, author.tenant_id, candidate_id, lock=True, author_user_id=author.user_id)
    if candidate.status != CandidateStatus.CHANGES_REQUESTED:
        raise Conflict(f"the candidate is {candidate.status}: it is revised after a reviewer requests changes",
                       code="knowledge_not_changes_requested")
    if expected_version != candidate.version:
        raise VersionConflict(f"the candidate is at version {candidate.version}, not {expected_version}",
                              details={"version": candidate.version})
    # the same rules as when it opened: its origin's ceiling, the credential's, what it may supersede
    clean, redactions = proposal.redacted()
    clean = replace(clean, origin=Origin(candidate.origin), origin_ref=candidate.origin_ref,
                    authority=capped(clean.authority, ceiling(Origin(candidate.origin), author.agent_id)))
    check_supersedes(session, author.tenant_id, clean)
    sha256 = content_sha256(clean)
    found, _ = duplicates(session, author.tenant_id, clean, sha256)
    candidate.key, candidate.claim = clean.key, clean.claim
    candidate.structured = dict(clean.structured) if clean.structured else None
    candidate.authority, candidate.scope_type = clean.authority.value, clean.scope_type.value
    candidate.project_id, candidate.source_refs = clean.project_id, list(clean.source_refs)
    candidate.evidence = [dict(e) for e in clean.evidence]
    candidate.valid_from, candidate.valid_to, candidate.supersedes = clean.valid_from, clean.valid_to, clean.supersedes
    candidate.target, candidate.skill_name = clean.target, clean.skill_name
    candidate.content_sha256, candidate.redactions = sha256, [r.as_json() for r in redactions]
    candidate.duplicates = [d for d in found if d.get("candidate_id") != str(candidate.candidate_id)]
    candidate.conflicts = conflicts(session, author.tenant_id, clean)
    candidate.version += 1
    candidate.status = CandidateStatus.PENDING_REVIEW
    _bump(candidate, now)
    session.add(AuditEntry(tenant_id=author.tenant_id, actor=author.user_id, action="KNOWLEDGE_CANDIDATE_REVISED",
                           detail={"candidate_id": str(candidate_id), "version": candidate.version,
                                   "content_sha256": sha256, "redactions": candidate.redactions}))
    session.flush()
    return candidate


def expire(session: Session, tenant_id: str, candidate_id: uuid.UUID, now: datetime) -> KnowledgeCandidate:
    """Nobody decided by the deadline: an open candidate becomes EXPIRED (a closed one stays as it is)."""
    candidate = get_candidate(session, tenant_id, candidate_id, lock=True)
    if candidate.status in (CandidateStatus.PENDING_REVIEW, CandidateStatus.CHANGES_REQUESTED):
        candidate.status = CandidateStatus.EXPIRED
        _bump(candidate, now)
        session.add(AuditEntry(tenant_id=tenant_id, actor="system", action="KNOWLEDGE_CANDIDATE_EXPIRED",
                               detail={"candidate_id": str(candidate_id)}))
        session.flush()
    return candidate


def reminder(session: Session, tenant_id: str, candidate_id: uuid.UUID, number: int) -> Reminder | None:
    """Reminder ``number`` of a candidate still waiting for review, for the tenant's webhook (None: no webhook,
    or nothing to review). It names the review, never the claim. Recorded once: ``reminders_sent`` is a count,
    not a change a reviewer decides on, so ``state_version`` stays."""
    candidate = get_candidate(session, tenant_id, candidate_id, lock=True)
    if candidate.status != CandidateStatus.PENDING_REVIEW:
        return None
    candidate.reminders_sent = max(candidate.reminders_sent, number)
    body = {
        "type": REMINDER_EVENT, "tenant_id": tenant_id, "candidate_id": str(candidate_id),
        "reminder_number": number, "content_sha256": candidate.content_sha256,
        "state_version": candidate.state_version,
        "deadline_at": candidate.review_deadline.isoformat() if candidate.review_deadline else None,
    }
    return signed_message(session, tenant_id, REMINDER_EVENT, f"knowledge-review-reminder:{candidate_id}:{number}",
                          body)


REVIEW_START_GRACE = timedelta(seconds=30)
"""How long the sweep leaves a new candidate to the API, which starts its review at once."""


def mark_started(session: Session, tenant_id: str, candidate_id: uuid.UUID, now: datetime,
                 deadline_seconds: float) -> KnowledgeCandidate:
    """Its review workflow runs: recorded once, with the deadline when the candidate opened without one (a
    session commit, a task, a deletion's re-review). Returns the row as it is, so the workflow starts from it."""
    candidate = get_candidate(session, tenant_id, candidate_id, lock=True)
    if candidate.review_started_at is None:
        candidate.review_started_at = now
    if candidate.review_deadline is None and candidate.status in OPEN_STATUSES:
        candidate.review_deadline = now + timedelta(seconds=deadline_seconds)
    session.flush()
    return candidate


def _unreviewed(tenant_id: str | ColumnElement[str], now: datetime) -> tuple[ColumnElement[bool], ...]:
    return (KnowledgeCandidate.tenant_id == tenant_id, KnowledgeCandidate.review_started_at.is_(None),
            KnowledgeCandidate.status.in_(OPEN_STATUSES), KnowledgeCandidate.created_at <= now - REVIEW_START_GRACE)


def unreviewed(session: Session, tenant_id: str, now: datetime, limit: int) -> list[KnowledgeCandidate]:
    """Open candidates no review workflow has run for yet (opened by a pipeline, or while Temporal was down)."""
    return list(session.execute(
        select(KnowledgeCandidate).where(*_unreviewed(tenant_id, now))
        .order_by(KnowledgeCandidate.created_at).limit(limit)
    ).scalars())


def has_unreviewed(tenant_id: ColumnElement[str], now: datetime) -> ColumnElement[bool]:
    """``tenant_id`` (a column, for a listing over tenants) has a candidate :func:`unreviewed` would return."""
    return select(KnowledgeCandidate.candidate_id).where(*_unreviewed(tenant_id, now)).exists()
