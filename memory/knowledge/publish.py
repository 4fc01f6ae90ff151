"""Publishing an approved candidate: a new version of a knowledge item, indexed in the same transaction.

The item a candidate publishes to is, in order: the one it names in ``supersedes``; the ACTIVE item of its key
and scope; else a new item (version 1). The version it replaces becomes SUPERSEDED (recall shows it as a
warning, never as a fact). The full text, trigram and vector columns are written in the publishing
transaction, so an item is never published unsearchable; the vector is computed by the caller beforehand
(an activity holding the embedder) and passed in.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memory.errors import InvalidInput
from memory.knowledge.candidates import CandidateStatus, claim_text, same_scope
from memory.knowledge.content import Authority
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.models import AuditEntry
from memory.text import lexemes


@dataclass(frozen=True)
class Vector:
    """A passage vector of the item's text, and the model that computed it."""

    values: Sequence[float]
    model: str


def searchable_text(claim: str, structured: dict[str, object] | None, key: str | None) -> str:
    """What full text, trigram and vector search read: the claim, the key, and an incident's fields."""
    parts = [claim, key or ""]
    if structured:
        parts += [str(v) for k, v in structured.items() if k not in ("kind", "attempts") and isinstance(v, str)]
    return " ".join(p for p in parts if p)


def lineage(session: Session, candidate: KnowledgeCandidate) -> KnowledgeItem | None:
    """The ACTIVE version this candidate replaces, locked, or None (a new item)."""
    base = select(KnowledgeItem).where(KnowledgeItem.tenant_id == candidate.tenant_id,
                                       KnowledgeItem.status == "ACTIVE")
    if candidate.supersedes is not None:
        found = session.execute(
            base.where(KnowledgeItem.knowledge_id == candidate.supersedes, same_scope(candidate)).with_for_update()
        ).scalar_one_or_none()
        if found is not None:
            return found
    if candidate.key is None:
        return None
    return session.execute(
        base.where(KnowledgeItem.key == candidate.key, same_scope(candidate)).with_for_update()
    ).scalar_one_or_none()


def publish(
    session: Session, candidate: KnowledgeCandidate, reviewer_user_id: str, now: datetime, vector: Vector | None,
    authority: Authority | None = None,
) -> KnowledgeItem:
    """Publish ``candidate`` (locked by the caller, already checked) as the next version of its item, with the
    reviewer's ``authority`` (default: the candidate's)."""
    return publish_over(session, candidate, lineage(session, candidate), reviewer_user_id, now, vector, authority)


def publish_over(
    session: Session, candidate: KnowledgeCandidate, previous: KnowledgeItem | None, reviewer_user_id: str,
    now: datetime, vector: Vector | None, authority: Authority | None = None,
) -> KnowledgeItem:
    """:func:`publish` with its :func:`lineage` already read (and locked) by a caller that judged it first.
    Knowledge rests on a source: without one it is refused."""
    if not candidate.source_refs:
        raise InvalidInput("knowledge without a source cannot be published: propose it again naming its source",
                           code="knowledge_source_required")
    knowledge_id = previous.knowledge_id if previous is not None else uuid.uuid4()
    version = 1
    if previous is not None:
        version = previous.version + 1
        session.execute(update(KnowledgeItem).where(
            KnowledgeItem.tenant_id == previous.tenant_id, KnowledgeItem.knowledge_id == previous.knowledge_id,
            KnowledgeItem.version == previous.version).values(status="SUPERSEDED"))
        session.flush()
    text = searchable_text(candidate.claim, candidate.structured, candidate.key)
    item = KnowledgeItem(
        tenant_id=candidate.tenant_id, knowledge_id=knowledge_id, version=version, status="ACTIVE",
        key=candidate.key, claim=candidate.claim, structured=candidate.structured,
        authority=(authority or Authority(candidate.authority)).value,
        scope_type=candidate.scope_type, project_id=candidate.project_id, source_refs=list(candidate.source_refs),
        evidence=list(candidate.evidence), valid_from=candidate.valid_from, valid_to=candidate.valid_to,
        candidate_id=candidate.candidate_id, author_user_id=candidate.author_user_id,
        reviewer_user_id=reviewer_user_id, published_at=now,
        supersedes_version=previous.version if previous is not None else None,
        content_sha256=candidate.content_sha256, search_text=claim_text(text),
        tokens=func.to_tsvector("simple", " ".join(lexemes(text))),
        embedding=list(vector.values) if vector is not None else None,
        embedding_model=vector.model if vector is not None else None,
    )
    session.add(item)
    candidate.status = CandidateStatus.APPROVED
    candidate.knowledge_id, candidate.knowledge_version = knowledge_id, version
    candidate.state_version += 1
    candidate.updated_at = now
    session.add(AuditEntry(tenant_id=candidate.tenant_id, actor=reviewer_user_id, action="KNOWLEDGE_PUBLISHED",
                           detail={"candidate_id": str(candidate.candidate_id), "knowledge_id": str(knowledge_id),
                                   "version": version, "supersedes_version": item.supersedes_version,
                                   "content_sha256": candidate.content_sha256}))
    session.flush()
    return item


def versions(session: Session, tenant_id: str, knowledge_id: uuid.UUID) -> list[KnowledgeItem]:
    """Every version of an item, newest first (empty: no such item in this tenant)."""
    return list(session.execute(
        select(KnowledgeItem).where(KnowledgeItem.tenant_id == tenant_id, KnowledgeItem.knowledge_id == knowledge_id)
        .order_by(KnowledgeItem.version.desc())
    ).scalars())
