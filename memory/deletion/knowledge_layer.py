"""The knowledge layer of a deletion: candidates and published items that rest on a deleted source (issue 27 §3,
seed 001 §7.2: what depends on a deleted source is invalidated).

A source is named in ``source_refs`` as ``kind:id`` (memory.knowledge.content). For a job's scope, the deleted
sources are its memories and events and the memories derived only from them (the links the derived-memory layer
follows), its session, and its records. Then, per row:

- a candidate loses the deleted refs (and the evidence quoting them); left with none, or when the source of its
  very words is deleted (a promotion's memory, a session commit's CASE: :func:`defining_source`), it is WITHDRAWN
  and its texts are scrubbed (claim, key, evidence, structured, the reviewer's reason; conflicts hold ids only);
- a published version loses the deleted refs; left with none (or without the source of its words), it is
  WITHDRAWN (the barrier does that at once, so
  the next recall no longer shows it: recall needs no filter of its own), its texts and search columns scrubbed,
  and a REREVIEW candidate that names it, with no text of it, is opened for reviewers ("its only source was
  deleted");
- a SUBJECT deletion also forgets what the subject wrote that nobody approved: every candidate they authored that
  is not APPROVED is WITHDRAWN and scrubbed. Approved knowledge is the tenant's, reviewed by someone else: it stays
  (unless its sources went), and the subject's name is replaced on it (author, reviewer, decider).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, cast, false, func, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import Text

from memory.db import affected_rows
from memory.deletion.fingerprints import Matcher
from memory.deletion.record_layer import records_in
from memory.deletion.residue import matchers
from memory.deletion.scope import ScopeType, events_in, scope_of
from memory.knowledge.candidates import OPEN_STATUSES, CandidateStatus
from memory.knowledge.content import Origin
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.models import AuditEntry, DeletionJob, MemoryEvent
from memory.resources.models import ResourceRecord

SOURCE_DELETED = "its only source was deleted"
"""What reviewers read on a withdrawn item and on the REREVIEW candidate that names it: no text of the item."""
FORGOTTEN_USER = "forgotten-user"
"""Who a subject deletion leaves as the author, reviewer or decider of knowledge it keeps."""


def deleted_sources(session: Session, job: DeletionJob, links: list[str]) -> list[str]:
    """The ``kind:id`` refs of every source this job deletes: ``links`` (its memories and events, and the memories
    derived only from them: memory.deletion.layers.deleted_links), its sessions and its records."""
    scope = scope_of(job)
    refs = list(links)
    if scope.type is ScopeType.SESSION:
        refs.append(f"session:{scope.target_id}")
    if scope.type is ScopeType.SUBJECT:
        sessions = session.execute(select(MemoryEvent.session_id).where(
            events_in(scope, job.tenant_id, job.barrier_revision), MemoryEvent.session_id.is_not(None)).distinct())
        refs += [f"session:{s}" for s in sessions.scalars()]
    if scope.type is ScopeType.RECORD:
        refs.append(f"record:{scope.target_id}")
    elif scope.type is ScopeType.SUBJECT:
        records = session.execute(select(ResourceRecord.resource, ResourceRecord.record_id).where(records_in(job)))
        refs += [f"record:{r.resource}:{r.record_id}" for r in records]
    return list(dict.fromkeys(refs))


def _citing(column: Any, refs: list[str]) -> ColumnElement[bool]:
    """``column`` (a ``source_refs``) names one of ``refs`` at least."""
    overlaps: ColumnElement[bool] = column.op("&&")(cast(refs, ARRAY(Text)))
    return overlaps


def defining_source(origin: str, origin_ref: str | None, source_refs: list[str]) -> str | None:
    """The source whose words a row carries: a promotion copies its memory's text, a session commit its CASE's.
    When that one is deleted the row goes, whatever other refs it names (a session, a commit: context, not the
    words). None: the row's words are its author's own."""
    if origin == Origin.PROMOTION.value and origin_ref:
        return origin_ref.split("@", 1)[0]
    if origin == Origin.SESSION_COMMIT.value:
        return next((r for r in source_refs if r.startswith("memory:")), None)
    return None


def _items_defined_by(session: Session, items: list[KnowledgeItem]) -> dict[uuid.UUID, str]:
    """The defining source of each item, from the candidate it was published from."""
    ids = {i.candidate_id for i in items}
    if not ids:
        return {}
    rows = session.execute(select(KnowledgeCandidate.candidate_id, KnowledgeCandidate.origin,
                                  KnowledgeCandidate.origin_ref).where(
        KnowledgeCandidate.tenant_id == items[0].tenant_id, KnowledgeCandidate.candidate_id.in_(ids))).all()
    origins = {cid: (origin, ref) for cid, origin, ref in rows}
    found: dict[uuid.UUID, str] = {}
    for item in items:
        origin, ref = origins.get(item.candidate_id, (Origin.API.value, None))
        defining = defining_source(origin, ref, list(item.source_refs))
        if defining is not None:
            found[item.candidate_id] = defining
    return found


def _loses_all(row_refs: list[str], defining: str | None, gone: set[str]) -> bool:
    """Nothing it rests on is left, or the source of its very words is deleted."""
    return not [r for r in row_refs if r not in gone] or (defining is not None and defining in gone)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _copies_of_deleted(session: Session, job: DeletionJob) -> Callable[[KnowledgeCandidate | KnowledgeItem], bool]:
    """Does a row that cites a deleted source still hold its words (in the claim, an incident's fields or the
    evidence)? Judged by the deletion's own fingerprints of what it deletes (kept at the barrier), so an author's
    claim quoting a deleted memory goes even when the row names other sources too. The fingerprints are read on the
    first row asked about: a deletion that touches no knowledge never loads them."""
    loaded: list[Matcher | None] = []

    def holds(row: KnowledgeCandidate | KnowledgeItem) -> bool:
        if not loaded:
            loaded.append(matchers(session, job.tenant_id, [job.job_id]).get(job.job_id))
        matcher = loaded[0]
        return matcher is not None and any(
            matcher.copies(text) for text in _strings([row.claim, row.structured, row.evidence]) if text)

    return holds


@dataclass(frozen=True)
class _Deleted:
    """The sources a job deletes, and the one rule by which a row citing them goes (scrubbed, withdrawn) rather
    than only losing the refs: the barrier and every purge batch judge by it."""

    refs: list[str]
    copies: Callable[[KnowledgeCandidate | KnowledgeItem], bool]

    @property
    def gone(self) -> set[str]:
        return set(self.refs)

    def candidate_goes(self, c: KnowledgeCandidate) -> bool:
        defining = defining_source(c.origin, c.origin_ref, list(c.source_refs))
        return _loses_all(list(c.source_refs), defining, self.gone) or self.copies(c)

    def items_going(self, session: Session, items: Sequence[KnowledgeItem]) -> set[tuple[uuid.UUID, int]]:
        defined_by = _items_defined_by(session, list(items))
        return {(i.knowledge_id, i.version) for i in items
                if _loses_all(list(i.source_refs), defined_by.get(i.candidate_id), self.gone) or self.copies(i)}


def _deleted(session: Session, job: DeletionJob, links: list[str]) -> _Deleted:
    return _Deleted(deleted_sources(session, job, links), _copies_of_deleted(session, job))


def _kept_evidence(evidence: list[dict[str, Any]], gone: set[str]) -> list[dict[str, Any]]:
    """Evidence entries whose ref is not deleted (an entry quotes its source: the quote goes with it)."""
    return [e for e in evidence if e.get("ref") not in gone]


def withdraw_at_once(session: Session, job: DeletionJob, links: list[str]) -> int:
    """The barrier's part: every ACTIVE version whose sources are all deleted is WITHDRAWN now, with its
    re-review opened; its texts go in the purge. Returns how many."""
    deleted = _deleted(session, job, links)
    if not deleted.refs:
        return 0
    citing = list(session.execute(select(KnowledgeItem).where(
        KnowledgeItem.tenant_id == job.tenant_id, KnowledgeItem.status == "ACTIVE",
        _citing(KnowledgeItem.source_refs, deleted.refs),
    ).with_for_update()).scalars())
    going = deleted.items_going(session, citing)
    items = [i for i in citing if (i.knowledge_id, i.version) in going]
    for item in items:
        _withdraw(session, job, item)
    open_ones = session.execute(select(KnowledgeCandidate).where(
        KnowledgeCandidate.tenant_id == job.tenant_id, KnowledgeCandidate.status.in_(OPEN_STATUSES),
        _citing(KnowledgeCandidate.source_refs, deleted.refs),
    ).with_for_update()).scalars().all()
    closed = 0
    for c in open_ones:  # withdrawn now, so nobody approves it before the purge scrubs it
        if deleted.candidate_goes(c):
            c.status, c.state_version = CandidateStatus.WITHDRAWN, c.state_version + 1
            closed += 1
    session.flush()
    return len(items) + closed


def _withdraw(session: Session, job: DeletionJob, item: KnowledgeItem) -> None:
    item.status, item.withdrawn_reason = "WITHDRAWN", SOURCE_DELETED
    note = f"{SOURCE_DELETED}: knowledge {item.knowledge_id} v{item.version} was withdrawn; propose it again with a " \
           "source that still exists, or leave it withdrawn"
    candidate = KnowledgeCandidate(
        tenant_id=item.tenant_id, candidate_id=uuid.uuid4(), status=CandidateStatus.PENDING_REVIEW,
        claim=note, authority=item.authority, scope_type=item.scope_type, project_id=item.project_id,
        source_refs=[], evidence=[], supersedes=item.knowledge_id, origin=Origin.REREVIEW.value,
        origin_ref=f"knowledge:{item.knowledge_id}@{item.version}", author_user_id="deletion-workflow",
        content_sha256=hashlib.sha256(note.encode()).hexdigest(),
    )
    session.add(candidate)
    session.add(AuditEntry(tenant_id=item.tenant_id, actor="deletion-workflow", action="KNOWLEDGE_WITHDRAWN",
                           job_id=job.job_id, detail={"knowledge_id": str(item.knowledge_id), "version": item.version,
                                                      "reason": SOURCE_DELETED,
                                                      "rereview_candidate_id": str(candidate.candidate_id)}))


def _scrub_candidate(row: KnowledgeCandidate) -> None:
    row.status = CandidateStatus.WITHDRAWN
    row.claim, row.key, row.structured, row.evidence, row.source_refs = "", None, None, [], []
    row.decision_reason = None
    row.duplicates = [{"knowledge_id": d.get("knowledge_id"), "version": d.get("version")} for d in row.duplicates]
    row.conflicts = [{"knowledge_id": c.get("knowledge_id"), "version": c.get("version")} for c in row.conflicts]
    row.state_version += 1
    row.updated_at = func.now()


def _scrub_item(row: KnowledgeItem) -> None:
    if row.status == "ACTIVE":
        row.status, row.withdrawn_reason = "WITHDRAWN", SOURCE_DELETED
    row.claim, row.key, row.structured, row.evidence, row.source_refs = "", None, None, [], []
    row.search_text, row.tokens, row.embedding, row.embedding_model = "", func.to_tsvector("simple", ""), None, None


def purge_knowledge(
    session: Session, job: DeletionJob, batch: int, links: list[str],
) -> tuple[int, bool, dict[str, int]]:
    """One batch (removed, done, evidence): rows citing a deleted source lose it (scrubbed when none is left); for a
    subject, their unapproved candidates go, then their name leaves the rest. Idempotent: a row done no longer
    matches. A tuple, as memory.deletion.layers wraps it (that module lists this one among its purgers)."""
    deleted = _deleted(session, job, links)
    refs, gone = deleted.refs, deleted.gone
    subject = job.subject_user_id if job.scope_type == ScopeType.SUBJECT.value else None
    unapproved = and_(KnowledgeCandidate.author_user_id == subject, KnowledgeCandidate.claim != "",
                      KnowledgeCandidate.status != CandidateStatus.APPROVED) if subject else false()
    candidates = session.execute(select(KnowledgeCandidate).where(
        KnowledgeCandidate.tenant_id == job.tenant_id,
        or_(_citing(KnowledgeCandidate.source_refs, refs) if refs else false(), unapproved),
    ).limit(batch).with_for_update()).scalars().all()
    withdrawn = 0
    for c in candidates:
        kept = [r for r in c.source_refs if r not in gone]
        if deleted.candidate_goes(c) \
                or (subject is not None and c.author_user_id == subject and c.status != CandidateStatus.APPROVED):
            _scrub_candidate(c)
            withdrawn += 1
        else:
            c.source_refs, c.evidence = kept, _kept_evidence(c.evidence, gone)
            c.state_version += 1
    items = session.execute(select(KnowledgeItem).where(
        KnowledgeItem.tenant_id == job.tenant_id, _citing(KnowledgeItem.source_refs, refs),
    ).limit(batch).with_for_update()).scalars().all() if refs else []
    scrubbed = 0
    going = deleted.items_going(session, items)
    for item in items:
        if (item.knowledge_id, item.version) not in going:
            item.source_refs = [r for r in item.source_refs if r not in gone]
            item.evidence = _kept_evidence(item.evidence, gone)
            continue
        if item.status == "ACTIVE":  # written after the barrier's check: withdrawn and re-reviewed here
            _withdraw(session, job, item)
        _scrub_item(item)
        scrubbed += 1
    session.flush()
    # Their name goes last: the candidates above are found by it, batch after batch.
    renamed = _forget_names(session, job.tenant_id, subject) if subject and len(candidates) < batch else 0
    done = len(candidates) < batch and len(items) < batch
    return withdrawn + scrubbed, done, {"candidates_withdrawn": withdrawn, "items_withdrawn": scrubbed,
                                        "refs_dropped": len(candidates) + len(items) - withdrawn - scrubbed,
                                        "names_replaced": renamed}


def _forget_names(session: Session, tenant_id: str, subject: str) -> int:
    """The subject's user id off the knowledge the tenant keeps (authored, reviewed or decided by them)."""
    renamed = 0
    for column in (KnowledgeCandidate.author_user_id, KnowledgeCandidate.decided_by):
        renamed += affected_rows(session.execute(update(KnowledgeCandidate).where(
            KnowledgeCandidate.tenant_id == tenant_id, column == subject).values({column: FORGOTTEN_USER})))
    for column in (KnowledgeItem.author_user_id, KnowledgeItem.reviewer_user_id):
        renamed += affected_rows(session.execute(update(KnowledgeItem).where(
            KnowledgeItem.tenant_id == tenant_id, column == subject).values({column: FORGOTTEN_USER})))
    return renamed
