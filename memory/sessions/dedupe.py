"""De-duplicating a commit's candidates against stored memories: rules first, inside the hard filters.

Seed 004 §8.3's decisions, decided deterministically (no model): the caller's visible, current memories of
the same space and category are the only ones compared (hard filters before anything else), then

1. the same normalised content → SKIP (TOOL_EXPERIENCE / SKILL_EXECUTION: MERGE, counting one more
   occurrence);
2. the same key (``profile.city``) with other content → MERGE: the new value supersedes (PROFILE always
   merges; a correction always does), unless the candidate is a model's inference (E4), which never
   supersedes anything: it stays a CANDIDATE of its own;
3. a near-duplicate (pg_trgm similarity ≥ :data:`NEAR_DUPLICATE`, with as many negation words) → SKIP
   (TOOL/SKILL: MERGE);
4. else CREATE.

A SKILL_EXECUTION is compared with its key's memories only: the key names the skill, the trees it resolved to and
the outcome, so a failed run never counts as one more success, however alike their texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memory.enums import Category, SourceLevel, Space, Status
from memory.identity.auth import PrincipalContext
from memory.models import Memory
from memory.sessions.extraction.base import Candidate
from memory.sessions.negation import negations
from memory.store.visibility import not_tombstoned, visible_to
from memory.text import normalize

NEAR_DUPLICATE = 0.8
"""Trigram similarity of normalised content above which two memories say the same thing."""
ACCUMULATING = frozenset({Category.TOOL_EXPERIENCE, Category.SKILL_EXECUTION})


class Decision(StrEnum):
    SKIP = "SKIP"
    CREATE = "CREATE"
    MERGE = "MERGE"


@dataclass(frozen=True)
class Decided:
    candidate: Candidate
    decision: Decision
    reason: str
    """``same_content``, ``same_key``, ``near_duplicate``, ``accumulate``, ``new``."""
    target: Memory | None = None
    similarity: float | None = None


def stored_content(candidate: Candidate) -> str:
    """What the memory's content holds: a keyed preference stores its value (recall reads a preference's value
    from its content, :func:`memory.recall.preferences.effective_preferences`); everything else the source
    text verbatim. The sentence of a keyed preference stays in its overview and its evidence event."""
    if candidate.category is Category.PREFERENCE and candidate.key and candidate.value:
        return candidate.value
    return candidate.content


def space_for(category: Category) -> Space:
    return Space.USER if category in (Category.PROFILE, Category.PREFERENCE, Category.ENTITY, Category.EVENT) else (
        Space.AGENT
    )


def serialize_owner(session: Session, principal: PrincipalContext) -> None:
    """Hold the owner's de-duplication lock until the transaction ends: two commits (or a commit and a
    remember-now) of one user deciding at once would both see "new" and both CREATE the same memory."""
    session.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(
        f"mnemo-dedupe:{principal.tenant_id}:{principal.user_id}", 0))))


def decide(session: Session, principal: PrincipalContext, candidate: Candidate) -> Decided:
    """The decision for one candidate against the caller's current memories of its space and category."""
    base = select(Memory).where(
        visible_to(principal),
        not_tombstoned(),
        Memory.space == space_for(candidate.category).value,
        Memory.category == candidate.category.value,
        Memory.status.in_([Status.ACTIVE.value, Status.CANDIDATE.value]),
    )
    if candidate.category is Category.SKILL_EXECUTION:
        base = base.where(Memory.key == candidate.key)
    # A model's inference (E4) can neither supersede nor be counted into a new version (the store refuses an
    # E4 correction): for it, "the same again" is a SKIP.
    accumulating = candidate.category in ACCUMULATING and candidate.source_level is not SourceLevel.E4
    content = stored_content(candidate)
    similarity = func.similarity(Memory.content, content)
    nearest = session.execute(
        base.add_columns(similarity.label("similarity")).order_by(similarity.desc(), Memory.stored_at.desc()).limit(1)
    ).first()
    if nearest is not None and normalize(nearest[0].content) == normalize(content):
        if accumulating:
            return Decided(candidate, Decision.MERGE, "accumulate", nearest[0], 1.0)
        if nearest[0].status == Status.CANDIDATE.value and candidate.source_level is not SourceLevel.E4:
            # the user now states what was only proposed (a model's guess): a new version, by the statement
            return Decided(candidate, Decision.MERGE, "stated_now", nearest[0], 1.0)
        return Decided(candidate, Decision.SKIP, "same_content", nearest[0], 1.0)
    if candidate.key is not None:
        same_key = session.execute(
            base.where(Memory.key == candidate.key).order_by(Memory.stored_at.desc()).limit(1)
        ).scalar_one_or_none()
        if same_key is not None:
            if candidate.source_level is SourceLevel.E4:
                return Decided(candidate, Decision.CREATE, "inference_never_supersedes")
            return Decided(candidate, Decision.MERGE, "accumulate" if accumulating else "same_key", same_key)
    if (nearest is not None and float(nearest.similarity) >= NEAR_DUPLICATE
            and negations(nearest[0].content) == negations(content)):  # "I like X" is no duplicate of "I don't"
        row, score = nearest[0], float(nearest.similarity)
        if accumulating:
            return Decided(candidate, Decision.MERGE, "accumulate", row, score)
        return Decided(candidate, Decision.SKIP, "near_duplicate", row, score)
    return Decided(candidate, Decision.CREATE, "new")
