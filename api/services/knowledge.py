"""Knowledge candidates and published knowledge: open a candidate and start its review, revise it, review it
(the review workflow's Update), and read candidates and items. What the routers, the console and the CLI share.

:func:`open_and_review` is the one way a candidate opens (the API, a promotion, ...): the row and its review
workflow together. Who may read a candidate: a knowledge reviewer any of the tenant's, anyone else their own
(else the same 404 as a missing one). Rules in :mod:`memory.knowledge`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.schemas.knowledge import (
    REVISED_VERSION,
    CandidateCreatedOut,
    CandidateListOut,
    CandidateOut,
    KnowledgeItemOut,
    KnowledgeListOut,
    KnowledgeVersionsOut,
    ReviewIn,
    ReviewOut,
)
from api.services import tasks
from api.services.client import ClientSource, TemporalUnavailable
from api.settings import Settings
from memory.db import tenant_session
from memory.enums import Role
from memory.errors import Conflict, InvalidInput, NotFound
from memory.identity.auth import PrincipalContext
from memory.knowledge import review
from memory.knowledge.candidates import Author, Proposed, conflict_claims, get_candidate, propose
from memory.knowledge.content import Proposal, parse_proposal
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.knowledge.publish import versions
from memory.knowledge.review import ReviewRequest
from workflows.fairness import tenant_priority
from workflows.knowledge_review import (
    KnowledgeReviewInput,
    KnowledgeReviewWorkflow,
    Revised,
    workflow_id,
)
from workflows.report_task import ApprovalPolicy

LIST_LIMIT = 200


def author_of(principal: PrincipalContext) -> Author:
    return Author(principal.tenant_id, principal.user_id, principal.agent_id)


def is_reviewer(principal: PrincipalContext) -> bool:
    return principal.has(Role.KNOWLEDGE_REVIEWER)


def candidate_id_of(raw: str) -> uuid.UUID:
    """A malformed id names no candidate: the same 404 as a missing one."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NotFound("no such knowledge candidate", code="knowledge_candidate_not_found") from None


def split_body(body: dict[str, Any], field: str) -> tuple[dict[str, Any], Any]:
    """The candidate's content and the one request field beside it (``idempotency_key``, ``version``)."""
    rest = {k: v for k, v in body.items() if k != field}
    return rest, body.get(field)


# --- opening -------------------------------------------------------------------------------------------


def review_policy(settings: Settings) -> ApprovalPolicy:
    """How a review waits (``MNEMO_KNOWLEDGE_REVIEW_*``): its deadline, and a reminder every period until it."""
    return ApprovalPolicy(settings.knowledge_review_deadline_seconds, settings.knowledge_review_reminder_seconds)


async def open_and_review(
    temporal: ClientSource, engine: Engine, task_queue: str, policy: ApprovalPolicy, author: Author,
    proposal: Proposal, *, idempotency_key: str | None = None,
) -> Proposed:
    """Open a candidate (deadline = now + the policy's) and start its review workflow. Idempotent: the same key
    answers the first candidate, and its workflow is started if an earlier attempt stopped before."""

    def write() -> Proposed:
        with tenant_session(engine, author.tenant_id) as session:
            now = datetime.now(UTC)
            proposed = propose(session, author, proposal, now, idempotency_key=idempotency_key)
            if proposed.created:
                proposed.candidate.review_deadline = now + timedelta(seconds=policy.deadline_seconds)
            session.flush()
            return proposed

    proposed = await run_in_threadpool(write)
    await start_review(await temporal(), task_queue, proposed.candidate, policy)
    return proposed


async def start_review(client: Client, task_queue: str, candidate: KnowledgeCandidate, policy: ApprovalPolicy) -> None:
    """The candidate's review workflow, started once (a second start of the same id changes nothing)."""
    inp = KnowledgeReviewInput(candidate.tenant_id, review.state_of(candidate), candidate.created_at.isoformat(),
                               policy)
    try:
        await client.start_workflow(
            KnowledgeReviewWorkflow.run, inp, id=workflow_id(inp.tenant_id, inp.state.candidate_id),
            task_queue=task_queue,
            priority=tenant_priority(inp.tenant_id), id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        pass  # it ran and ended: the candidate is closed
    except RPCError as exc:
        raise TemporalUnavailable(f"Temporal could not start the review: {exc.message}") from exc


async def create(temporal: ClientSource, engine: Engine, task_queue: str, policy: ApprovalPolicy,
                 principal: PrincipalContext, body: dict[str, Any]) -> Proposed:
    content, key = split_body(body, "idempotency_key")
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= 200):
        problem = "must be a string of 1 to 200 characters"
        raise InvalidInput(f"idempotency_key {problem}", code="knowledge_candidate_invalid",
                           details={"problems": {"idempotency_key": problem}})
    return await open_and_review(temporal, engine, task_queue, policy, author_of(principal),
                                 parse_proposal(content), idempotency_key=key)


# --- reads ---------------------------------------------------------------------------------------------


def _readable(session: Session, principal: PrincipalContext, candidate_id: str) -> KnowledgeCandidate:
    """A reviewer reads any of the tenant's candidates, anyone else their own (else the same 404)."""
    return get_candidate(session, principal.tenant_id, candidate_id_of(candidate_id),
                         author_user_id=None if is_reviewer(principal) else principal.user_id)


def readable_candidate(engine: Engine, principal: PrincipalContext, candidate_id: str) -> KnowledgeCandidate:
    with tenant_session(engine, principal.tenant_id) as session:
        return _readable(session, principal, candidate_id)


def candidate_out(session: Session, candidate: KnowledgeCandidate) -> CandidateOut:
    """A candidate as a reviewer reads it, its conflicts' claims read now (never stored in the candidate)."""
    return CandidateOut.of(candidate, conflict_claims(session, candidate.tenant_id, [candidate]))


def created_out(engine: Engine, candidate: KnowledgeCandidate) -> CandidateCreatedOut:
    """The 201 body of a candidate that just opened."""
    with tenant_session(engine, candidate.tenant_id) as session:
        return CandidateCreatedOut.model_validate(candidate_out(session, candidate).model_dump(by_alias=True))


def show_candidate(engine: Engine, principal: PrincipalContext, candidate_id: str) -> CandidateOut:
    with tenant_session(engine, principal.tenant_id) as session:
        return candidate_out(session, _readable(session, principal, candidate_id))


def list_candidates(engine: Engine, principal: PrincipalContext, status: str | None) -> CandidateListOut:
    """A reviewer: the tenant's candidates; anyone else: their own. Oldest first (the next to review on top)."""
    query = select(KnowledgeCandidate).where(KnowledgeCandidate.tenant_id == principal.tenant_id)
    if not is_reviewer(principal):
        query = query.where(KnowledgeCandidate.author_user_id == principal.user_id)
    if status is not None:
        query = query.where(KnowledgeCandidate.status == status)
    with tenant_session(engine, principal.tenant_id) as session:
        rows = list(session.execute(query.order_by(KnowledgeCandidate.created_at, KnowledgeCandidate.candidate_id)
                                    .limit(LIST_LIMIT)).scalars())
        claims = conflict_claims(session, principal.tenant_id, rows)
        return CandidateListOut(items=[CandidateOut.of(c, claims) for c in rows])


@dataclass(frozen=True)
class KnowledgeFilter:
    status: str | None = "ACTIVE"
    key: str | None = None
    scope: str | None = None
    project_id: str | None = None
    authority: str | None = None


def list_knowledge(engine: Engine, principal: PrincipalContext, f: KnowledgeFilter) -> KnowledgeListOut:
    """Published versions of the tenant's knowledge (by default the ACTIVE ones), newest first."""
    query = select(KnowledgeItem).where(KnowledgeItem.tenant_id == principal.tenant_id)
    for column, value in ((KnowledgeItem.status, f.status), (KnowledgeItem.key, f.key),
                          (KnowledgeItem.scope_type, f.scope), (KnowledgeItem.project_id, f.project_id),
                          (KnowledgeItem.authority, f.authority)):
        if value is not None:
            query = query.where(column == value)
    with tenant_session(engine, principal.tenant_id) as session:
        rows = session.execute(query.order_by(KnowledgeItem.published_at.desc(), KnowledgeItem.knowledge_id)
                               .limit(LIST_LIMIT)).scalars()
        return KnowledgeListOut(items=[KnowledgeItemOut.of(i) for i in rows])


def show_knowledge(engine: Engine, principal: PrincipalContext, knowledge_id: str) -> KnowledgeVersionsOut:
    missing = NotFound("no such knowledge item", code="knowledge_not_found")
    try:
        parsed = uuid.UUID(knowledge_id)
    except ValueError:
        raise missing from None
    with tenant_session(engine, principal.tenant_id) as session:
        found = versions(session, principal.tenant_id, parsed)
        if not found:
            raise missing
        return KnowledgeVersionsOut(knowledge_id=str(parsed), versions=[KnowledgeItemOut.of(i) for i in found])


# --- revision and review -------------------------------------------------------------------------------


async def revise(temporal: ClientSource, engine: Engine, principal: PrincipalContext, candidate_id: str,
                 body: dict[str, Any]) -> CandidateOut:
    """The author's new content after ``request_changes``; the review workflow learns its hash and version."""
    content, raw_version = split_body(body, "version")
    try:
        version = REVISED_VERSION.validate_python(raw_version)
    except ValidationError:
        raise InvalidInput("name the version you revise: version (an integer, from GET /knowledge-candidates/{id})",
                           code="knowledge_candidate_invalid", details={"problems": {"version": "must be an integer"}}
                           ) from None
    proposal = parse_proposal(content)
    parsed = candidate_id_of(candidate_id)

    def write() -> tuple[KnowledgeCandidate, CandidateOut]:
        with tenant_session(engine, principal.tenant_id) as session:
            revised = review.revise(session, author_of(principal), parsed, version, proposal, datetime.now(UTC))
            return revised, candidate_out(session, revised)

    candidate, shown = await run_in_threadpool(write)
    client = await temporal()
    handle = client.get_workflow_handle(workflow_id(principal.tenant_id, str(parsed)))
    try:
        await handle.signal(KnowledgeReviewWorkflow.revised, Revised(candidate.content_sha256,
                                                                       candidate.state_version))
    except RPCError as exc:
        raise TemporalUnavailable(f"Temporal could not tell the review about the revision: {exc.message}") from exc
    return shown


def request_of(principal: PrincipalContext, body: ReviewIn) -> ReviewRequest:
    """The decision with the credential's identity; the reason redacted before it goes anywhere."""
    request = ReviewRequest(body.decision, body.content_sha256, body.state_version, principal.user_id,
                            sorted(principal.roles), principal.agent_id, review.clean_reason(body.reason),
                            body.authority)
    review.check_request(request)
    return request


async def decide(temporal: ClientSource, engine: Engine, principal: PrincipalContext, candidate_id: str,
                 body: ReviewIn) -> ReviewOut:
    """Approve, reject or request changes through the review workflow's Update. A closed candidate answers its
    own reviewer's same decision again (``replayed``) and refuses anything else."""
    request = request_of(principal, body)
    candidate = await run_in_threadpool(readable_candidate, engine, principal, candidate_id)
    closed = Conflict(f"the candidate is {candidate.status}: it cannot be decided again",
                      code="knowledge_candidate_closed")
    if candidate.status not in review.CLOSED:
        starting = Conflict("the candidate's review has not started yet (it starts within a minute): try again "
                            "shortly", code="knowledge_review_starting")
        client = await temporal()
        handle = client.get_workflow_handle(workflow_id(principal.tenant_id, str(candidate.candidate_id)))
        try:  # the row is the truth: a revision whose signal was lost reaches the workflow before this decision
            await handle.signal(KnowledgeReviewWorkflow.revised, Revised(
                candidate.content_sha256, candidate.state_version, candidate.status))
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise starting from exc
            raise TemporalUnavailable(f"Temporal could not reach the review: {exc.message}") from exc
        await tasks.update(handle, KnowledgeReviewWorkflow.review, request, starting)
        replayed = False
    else:
        if not review.is_replay(candidate, candidate.decided_by, candidate.decision, request):
            review.check_review(review.state_of(candidate), request)
            raise closed
        replayed = True
    return await run_in_threadpool(decided, engine, principal, str(candidate.candidate_id), replayed)


def decided(engine: Engine, principal: PrincipalContext, candidate_id: str, replayed: bool) -> ReviewOut:
    with tenant_session(engine, principal.tenant_id) as session:
        candidate = get_candidate(session, principal.tenant_id, uuid.UUID(candidate_id))
        item = None
        if candidate.knowledge_id is not None:
            item = session.get(KnowledgeItem, (principal.tenant_id, candidate.knowledge_id,
                                               candidate.knowledge_version))
        return ReviewOut(candidate=candidate_out(session, candidate),
                         knowledge=KnowledgeItemOut.of(item) if item is not None else None, replayed=replayed)
