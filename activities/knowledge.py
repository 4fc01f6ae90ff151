"""Knowledge review activities: apply a decision, expire, remind.

Payloads carry ids, hashes, versions, roles, decisions and the (redacted) reason, never a claim or evidence:
they are recorded in the review workflow's history. The claim is read and embedded here, outside the
publishing transaction (the model is the slow part), and never leaves the activity.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from temporalio import activity

from activities.tasks.base import task_session
from activities.tasks.reminders import deliver
from memory.egress import AllowList
from memory.embedders import TextEmbedder
from memory.knowledge import review
from memory.knowledge.candidates import get_candidate
from memory.knowledge.publish import Vector, searchable_text
from memory.knowledge.review import ReviewRequest, ReviewState


@dataclass(frozen=True)
class ReviewRef:
    tenant_id: str
    candidate_id: str


@dataclass(frozen=True)
class ApplyReviewInput:
    ref: ReviewRef
    request: ReviewRequest


@dataclass(frozen=True)
class ReviewOutcome:
    """What a decision did: the candidate's new state, the version it published, whether it could not."""

    state: ReviewState
    knowledge_id: str | None = None
    knowledge_version: int | None = None
    conflicts_changed: bool = False
    embedded: bool = False
    """False: published without a vector (no embedder configured); full text and trigram search still find it."""


@dataclass(frozen=True)
class KnowledgeReminderInput:
    ref: ReviewRef
    number: int


@dataclass(frozen=True)
class SyncInput:
    ref: ReviewRef
    deadline_seconds: float


@dataclass(frozen=True)
class UnreviewedInput:
    tenant_id: str
    limit: int = 100


@dataclass(frozen=True)
class ReviewStart:
    """A candidate whose review workflow is to be started, and how it is to wait."""

    state: ReviewState
    opened_at: str
    deadline_seconds: float
    reminder_every_seconds: float


class KnowledgeActivities:
    def __init__(self, engine: Engine, embedder: Callable[[], TextEmbedder] | None = None,
                 webhook_allowed: AllowList | None = None, wait: tuple[float, float] = (7 * 86400.0, 86400.0),
                 ) -> None:
        """``embedder``: the worker's model, started on first use; None publishes items without a vector.
        ``wait``: the deadline and reminder period (seconds) of reviews the sweep starts (the settings')."""
        self.engine = engine
        self.embedder = embedder
        self.webhook_allowed = webhook_allowed or AllowList()
        self.wait = wait

    def all(self) -> list[Callable[..., Any]]:
        return [self.apply_review, self.expire, self.deliver_reminder, self.sync, self.unreviewed]

    def _tx(self, tenant_id: str) -> AbstractContextManager[Session]:
        return task_session(self.engine, tenant_id)

    @activity.defn(name="knowledge_apply_review")
    def apply_review(self, req: ApplyReviewInput) -> ReviewOutcome:
        """Apply the decision with the row's state_version check; an approval is embedded first."""
        vector = self._vector(req) if req.request.decision == "approve" else None
        with self._tx(req.ref.tenant_id) as session:
            decided = review.decide(session, req.ref.tenant_id, uuid.UUID(req.ref.candidate_id), req.request,
                                    datetime.now(UTC), vector)
            item = decided.item
            return ReviewOutcome(
                review.state_of(decided.candidate), str(item.knowledge_id) if item else None,
                item.version if item else None, decided.conflicts_changed,
                item is not None and item.embedding_model is not None,
            )

    def _vector(self, req: ApplyReviewInput) -> Vector | None:
        if self.embedder is None:
            return None
        with self._tx(req.ref.tenant_id) as session:
            candidate = get_candidate(session, req.ref.tenant_id, uuid.UUID(req.ref.candidate_id))
            text = searchable_text(candidate.claim, candidate.structured, candidate.key)
        model = self.embedder()
        return Vector(model.embed([text])[0], model.name)

    @activity.defn(name="knowledge_expire")
    def expire(self, ref: ReviewRef) -> ReviewState:
        with self._tx(ref.tenant_id) as session:
            return review.state_of(review.expire(session, ref.tenant_id, uuid.UUID(ref.candidate_id),
                                                 datetime.now(UTC)))

    @activity.defn(name="knowledge_deliver_reminder")
    def deliver_reminder(self, req: KnowledgeReminderInput) -> str:
        """``delivered``, or ``skipped``: no webhook, or the candidate no longer waits for a review."""
        with self._tx(req.ref.tenant_id) as session:
            message = review.reminder(session, req.ref.tenant_id, uuid.UUID(req.ref.candidate_id), req.number)
        return deliver(message, self.webhook_allowed)

    @activity.defn(name="knowledge_review_sync")
    def sync(self, req: SyncInput) -> ReviewState:
        """The candidate as the database has it now (the workflow's state follows it), its review recorded as
        running, and a deadline given to one that opened without."""
        with self._tx(req.ref.tenant_id) as session:
            return review.state_of(review.mark_started(session, req.ref.tenant_id, uuid.UUID(req.ref.candidate_id),
                                                       datetime.now(UTC), req.deadline_seconds))

    @activity.defn(name="knowledge_unreviewed")
    def unreviewed(self, req: UnreviewedInput) -> list[ReviewStart]:
        """Open candidates of the tenant that no review workflow ran for yet, oldest first."""
        deadline, every = self.wait
        with self._tx(req.tenant_id) as session:
            return [ReviewStart(review.state_of(c), c.created_at.isoformat(), deadline, every)
                    for c in review.unreviewed(session, req.tenant_id, datetime.now(UTC), req.limit)]
