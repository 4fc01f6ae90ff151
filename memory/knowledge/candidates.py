"""Opening a knowledge candidate: redact, de-duplicate against published knowledge, show conflicts, store.

Every way in (the API, a session commit, a finished task, a promotion) ends here, so the rules are the same
for all: the content is redacted before it is stored or hashed (what was redacted is kept by kind and path);
an exact copy of an ACTIVE item in the same scope is refused (nothing to review); near copies and pending
candidates with the same content are listed as ``duplicates``; an ACTIVE item of the same key and scope that
says something else is a ``conflict`` the reviewer sees — approving supersedes it, nothing decides it silently.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select, tuple_
from sqlalchemy.orm import Session

from memory.errors import Conflict, IdempotencyConflict, NotFound
from memory.knowledge.content import Proposal, capped, ceiling, content_sha256
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.knowledge.redaction import Redaction
from memory.models import AuditEntry
from memory.text import normalize

NEAR_DUPLICATE = 0.6
"""Trigram similarity of two normalised claims from which a published item is listed as a near duplicate."""
MAX_LISTED = 10


class CandidateStatus:
    PENDING_REVIEW = "PENDING_REVIEW"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    WITHDRAWN = "WITHDRAWN"
    EXPIRED = "EXPIRED"
    """Nobody reviewed it by its deadline."""


OPEN_STATUSES = (CandidateStatus.PENDING_REVIEW, CandidateStatus.CHANGES_REQUESTED)


@dataclass(frozen=True)
class Author:
    """Who proposes: from the credential (or the pipeline acting for its owner), never from a body."""

    tenant_id: str
    user_id: str
    agent_id: str | None = None


@dataclass(frozen=True)
class Proposed:
    candidate: KnowledgeCandidate
    created: bool
    """False: the same idempotency key returned the candidate it created before."""


def claim_text(claim: str) -> str:
    """The claim as compared for duplicates: normalised, whitespace collapsed."""
    return " ".join(normalize(claim).split())


def same_scope(p: Proposal | KnowledgeCandidate) -> ColumnElement[bool]:
    scope_type = p.scope_type if isinstance(p.scope_type, str) else p.scope_type.value
    return and_(KnowledgeItem.scope_type == scope_type,
                func.coalesce(KnowledgeItem.project_id, "") == (p.project_id or ""))


def _item_ref(item: KnowledgeItem, **extra: Any) -> dict[str, Any]:
    return {"knowledge_id": str(item.knowledge_id), "version": item.version, "key": item.key,
            "authority": item.authority, **extra}


def duplicates(session: Session, tenant_id: str, p: Proposal, sha256: str) -> tuple[list[dict[str, Any]], bool]:
    """Published items saying (nearly) the same in the same scope, and open candidates with the same content;
    True when one ACTIVE item says exactly the same (under the same key, or both keyless)."""
    text = claim_text(p.claim)
    similarity = func.similarity(KnowledgeItem.search_text, text)
    rows = session.execute(
        select(KnowledgeItem, similarity).where(
            KnowledgeItem.tenant_id == tenant_id, KnowledgeItem.status == "ACTIVE", same_scope(p),
            or_(KnowledgeItem.search_text.bool_op("%")(text), similarity >= NEAR_DUPLICATE),
        ).order_by(similarity.desc(), KnowledgeItem.knowledge_id).limit(MAX_LISTED)
    ).all()
    found: list[dict[str, Any]] = []
    exact = False
    for item, score in rows:
        same = claim_text(item.claim) == text
        if not same and score < NEAR_DUPLICATE:
            continue
        exact = exact or (same and item.key == p.key)
        found.append(_item_ref(item, similarity=1.0 if same else round(float(score), 3), exact=same))
    pending = session.execute(
        select(KnowledgeCandidate.candidate_id).where(
            KnowledgeCandidate.tenant_id == tenant_id, KnowledgeCandidate.content_sha256 == sha256,
            KnowledgeCandidate.status.in_(OPEN_STATUSES),
        ).order_by(KnowledgeCandidate.created_at).limit(MAX_LISTED)
    ).scalars()
    found += [{"candidate_id": str(c), "similarity": 1.0, "exact": True, "pending": True} for c in pending]
    return found, exact


def conflicts(session: Session, tenant_id: str, p: Proposal | KnowledgeCandidate) -> list[dict[str, Any]]:
    """ACTIVE items of the same key and scope (or the one named in ``supersedes``) that say something else: what
    approving would replace. A reviewer sees each; nothing resolves them silently."""
    if p.key is None and p.supersedes is None:
        return []
    same = KnowledgeItem.key == p.key if p.key is not None else KnowledgeItem.knowledge_id == p.supersedes
    if p.key is not None and p.supersedes is not None:
        same = same | (KnowledgeItem.knowledge_id == p.supersedes)
    rows = session.execute(
        select(KnowledgeItem).where(KnowledgeItem.tenant_id == tenant_id, KnowledgeItem.status == "ACTIVE",
                                    same_scope(p), same)
        .order_by(KnowledgeItem.knowledge_id)
    ).scalars()
    text = claim_text(p.claim)
    return [_item_ref(item) for item in rows if claim_text(item.claim) != text or item.knowledge_id == p.supersedes]


def conflict_claims(session: Session, tenant_id: str, candidates: Iterable[KnowledgeCandidate]) -> dict[str, str]:
    """The claim of each item the candidates' ``conflicts`` name (``"{knowledge_id}@{version}"``), read now.

    A candidate stores the ids of what it conflicts with, never their text: the claim is joined when a reviewer
    reads it, so a deletion that scrubs an item leaves no copy of its words in other candidates."""
    wanted = {(uuid.UUID(str(k["knowledge_id"])), int(k["version"])) for c in candidates for k in c.conflicts}
    if not wanted:
        return {}
    rows = session.execute(
        select(KnowledgeItem.knowledge_id, KnowledgeItem.version, KnowledgeItem.claim).where(
            KnowledgeItem.tenant_id == tenant_id,
            tuple_(KnowledgeItem.knowledge_id, KnowledgeItem.version).in_(sorted(wanted)))
    ).all()
    return {f"{knowledge_id}@{version}": claim for knowledge_id, version, claim in rows}


def check_supersedes(session: Session, tenant_id: str, p: Proposal | KnowledgeCandidate) -> None:
    """What it supersedes is an active item of its scope, and no other active item holds its key: checked when it
    is proposed, revised and approved (another item may have taken the key meanwhile)."""
    if p.supersedes is None:
        return
    found = session.execute(
        select(KnowledgeItem.knowledge_id).where(KnowledgeItem.tenant_id == tenant_id,
                                                 KnowledgeItem.knowledge_id == p.supersedes,
                                                 KnowledgeItem.status == "ACTIVE", same_scope(p))
    ).first()
    if found is None:
        raise NotFound("no active knowledge item with that id in this scope to supersede",
                       code="knowledge_not_found", details={"supersedes": str(p.supersedes)})
    if p.key is None:
        return
    keyed = session.execute(
        select(KnowledgeItem.knowledge_id).where(KnowledgeItem.tenant_id == tenant_id, KnowledgeItem.key == p.key,
                                                 KnowledgeItem.status == "ACTIVE", same_scope(p))
    ).scalar_one_or_none()
    if keyed is not None and keyed != p.supersedes:
        raise Conflict("another active item already holds this key in this scope: supersede that one, or drop the "
                       "key", code="knowledge_supersedes_conflict",
                       details={"supersedes": str(p.supersedes), "key_held_by": str(keyed)})


def by_idempotency_key(session: Session, author: Author, key: str) -> KnowledgeCandidate | None:
    return session.execute(
        select(KnowledgeCandidate).where(KnowledgeCandidate.tenant_id == author.tenant_id,
                                         KnowledgeCandidate.author_user_id == author.user_id,
                                         KnowledgeCandidate.idempotency_key == key)
    ).scalar_one_or_none()


def propose(
    session: Session, author: Author, proposal: Proposal, now: datetime, *, idempotency_key: str | None = None,
) -> Proposed:
    """Open a candidate (``PENDING_REVIEW``) from ``proposal``; its review workflow is the caller's to start.

    The same idempotency key with the same content returns the first candidate; with other content it is a 409."""
    clean, redactions = proposal.redacted()
    clean = replace(clean, authority=capped(clean.authority, ceiling(clean.origin, author.agent_id)))
    sha256 = content_sha256(clean)
    if idempotency_key is not None:
        earlier = by_idempotency_key(session, author, idempotency_key)
        if earlier is not None:
            if earlier.content_sha256 != sha256 and earlier.version == 1:
                raise IdempotencyConflict("this idempotency key was used for another candidate",
                                          code="idempotency_conflict")
            return Proposed(earlier, created=False)
    check_supersedes(session, author.tenant_id, clean)
    found, exact = duplicates(session, author.tenant_id, clean, sha256)
    if exact:
        first = next(d for d in found if d.get("exact") and "knowledge_id" in d)
        raise Conflict("this exact claim is already published in this scope: nothing to review",
                       code="knowledge_already_published",
                       details={"knowledge_id": first["knowledge_id"], "version": first["version"]})
    candidate = KnowledgeCandidate(
        tenant_id=author.tenant_id, candidate_id=uuid.uuid4(), version=1, state_version=1,
        status=CandidateStatus.PENDING_REVIEW, target=clean.target, skill_name=clean.skill_name, key=clean.key,
        claim=clean.claim, structured=dict(clean.structured) if clean.structured else None,
        authority=clean.authority.value, scope_type=clean.scope_type.value, project_id=clean.project_id,
        source_refs=list(clean.source_refs), evidence=[dict(e) for e in clean.evidence],
        valid_from=clean.valid_from, valid_to=clean.valid_to, supersedes=clean.supersedes,
        origin=clean.origin.value, origin_ref=clean.origin_ref, author_user_id=author.user_id,
        author_agent_id=author.agent_id, content_sha256=sha256,
        redactions=[r.as_json() for r in redactions], duplicates=found,
        conflicts=conflicts(session, author.tenant_id, clean), idempotency_key=idempotency_key,
        created_at=now, updated_at=now,
    )
    session.add(candidate)
    session.add(AuditEntry(tenant_id=author.tenant_id, actor=author.user_id, action="KNOWLEDGE_CANDIDATE_OPENED",
                           detail=_audit(candidate, redactions)))
    session.flush()
    return Proposed(candidate, created=True)


def _audit(candidate: KnowledgeCandidate, redactions: list[Redaction]) -> dict[str, Any]:
    """Ids, hash and what was redacted (kind and path): never the claim or a redacted value."""
    return {"candidate_id": str(candidate.candidate_id), "content_sha256": candidate.content_sha256,
            "origin": candidate.origin, "authority": candidate.authority,
            "redactions": [r.as_json() for r in redactions], "conflicts": len(candidate.conflicts)}


def get_candidate(
    session: Session, tenant_id: str, candidate_id: uuid.UUID, *, lock: bool = False,
    author_user_id: str | None = None,
) -> KnowledgeCandidate:
    """The tenant's candidate (``author_user_id``: only if that user proposed it), or a 404 that says nothing
    about other tenants' or other authors'."""
    query = select(KnowledgeCandidate).where(KnowledgeCandidate.tenant_id == tenant_id,
                                             KnowledgeCandidate.candidate_id == candidate_id)
    if author_user_id is not None:
        query = query.where(KnowledgeCandidate.author_user_id == author_user_id)
    found = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if found is None:
        raise NotFound("no such knowledge candidate", code="knowledge_candidate_not_found")
    return found
