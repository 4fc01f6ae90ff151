"""Purging one layer, one batch (one transaction, one checkpoint) at a time.

Every batch function is idempotent: it only touches rows not yet purged, so a
batch repeated after a crash or a retry finds nothing left to do and succeeds.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import cast, delete, exists, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, insert
from sqlalchemy.orm import Session
from sqlalchemy.types import Text

from memory.deletion.jobs import Layer
from memory.deletion.scope import Scope, ScopeType, events_in, evidence_link, linked_refs, memories_in
from memory.enums import Status
from memory.events import next_revision
from memory.models import (
    AuditEntry,
    DeletionJob,
    DeletionProbe,
    Memory,
    MemoryEvent,
    MemoryLexeme,
    MemorySearch,
    RebuildBlock,
    Tombstone,
)
from memory.projection import delete_projection, write_projection


@dataclass(frozen=True)
class BatchResult:
    removed: int
    done: bool
    evidence: dict[str, Any] = field(default_factory=dict)


def scope_of(job: DeletionJob) -> Scope:
    scope_type = ScopeType(job.scope_type)
    target = {
        ScopeType.MEMORY: job.scope.get("memory_id"),
        ScopeType.EVENT: job.scope.get("event_id"),
        ScopeType.SESSION: job.scope.get("session_id"),
        ScopeType.SUBJECT: job.subject_user_id,
    }[scope_type]
    return Scope(scope_type, str(target), job.subject_user_id)




def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def purge_source_events(session: Session, job: DeletionJob, batch: int) -> BatchResult:
    """Scrub covered events; for a single memory, mark the events it came from instead."""
    scope, revision = scope_of(job), job.barrier_revision
    if scope.type is ScopeType.MEMORY:
        refs = session.execute(
            select(Memory.source_id, Memory.evidence_refs).where(memories_in(scope, job.tenant_id, revision))
        ).all()
        links = {ref for row in refs for ref in [row.source_id, *row.evidence_refs] if ref.startswith("event:")}
        marked = 0
        for link in links:
            try:
                event_id = uuid.UUID(link.removeprefix("event:"))
            except ValueError:
                continue
            marked += session.execute(
                insert(RebuildBlock)
                .values(tenant_id=job.tenant_id, event_id=event_id, memory_id=uuid.UUID(scope.target_id), job_id=job.job_id)
                .on_conflict_do_nothing()
            ).rowcount
        return BatchResult(0, True, {"rebuild_markers": marked})
    rows = session.execute(
        select(MemoryEvent)
        .where(events_in(scope, job.tenant_id, revision), MemoryEvent.purged_at.is_(None))
        .limit(batch)
        .with_for_update(skip_locked=True)
    ).scalars().all()
    for event in rows:
        event.payload = {}
        event.purged_at = func.now()
    session.flush()
    return BatchResult(len(rows), len(rows) < batch, {"events_scrubbed": len(rows)})


def purge_derived_memories(session: Session, job: DeletionJob, batch: int) -> BatchResult:
    """Memories built from the deleted records: gone if that was all their evidence, else re-derived.

    A memory that keeps independent evidence gets a new version without the deleted
    links, as a CANDIDATE: its text may have used the deleted facts, so it must be
    confirmed again before recall uses it.
    """
    scope, revision = scope_of(job), job.barrier_revision
    links = linked_refs(session, scope, job.tenant_id, revision)
    if not links:
        return BatchResult(0, True)
    covered_ids = select(Memory.memory_id).where(memories_in(scope, job.tenant_id, revision))
    heads = session.execute(
        select(Memory)
        .where(
            Memory.tenant_id == job.tenant_id,
            Memory.status.notin_([Status.SUPERSEDED.value, Status.DELETED.value]),
            Memory.memory_id.notin_(covered_ids),
            Memory.evidence_refs.op("?|")(cast(links, ARRAY(Text))),
        )
        .limit(batch)
        .with_for_update(skip_locked=True)
    ).scalars().all()
    deleted = rederived = 0
    link_set = set(links)
    for head in heads:
        kept = [ref for ref in head.evidence_refs if ref not in link_set]
        if not kept:
            _delete_derived(session, job, head)
            deleted += 1
        else:
            _rederive(session, head, kept)
            rederived += 1
    session.flush()
    return BatchResult(deleted, len(heads) < batch, {"derived_deleted": deleted, "derived_rederived": rederived})


def _delete_derived(session: Session, job: DeletionJob, head: Memory) -> None:
    session.execute(
        insert(Tombstone)
        .values(
            tenant_id=job.tenant_id,
            target_type="memory",
            target_id=str(head.memory_id),
            owner_user_id=head.owner_id,
            job_id=job.job_id,
            revision=next_revision(session),
        )
        .on_conflict_do_nothing()
    )
    session.execute(
        update(Memory)
        .where(Memory.tenant_id == head.tenant_id, Memory.memory_id == head.memory_id)
        .values(status=Status.DELETED.value, content="", abstract="", overview=None, key=None,
                evidence_refs=cast([], JSONB), purged_at=func.now())
    )
    delete_projection(session, head.tenant_id, [head.memory_id])


def _rederive(session: Session, head: Memory, kept: list[str]) -> None:
    values = {c.key: getattr(head, c.key) for c in Memory.__table__.columns if c.key not in ("stored_at",)}
    session.execute(
        update(Memory)
        .where(Memory.tenant_id == head.tenant_id, Memory.memory_id == head.memory_id, Memory.version == head.version)
        .values(status=Status.SUPERSEDED.value, evidence_refs=cast(kept, JSONB))
    )
    session.expunge(head)
    new = Memory(
        **{
            **values,
            "version": head.version + 1,
            "status": Status.CANDIDATE.value,
            "evidence_refs": kept,
            "supersedes_version": head.version,
            "created_by": "deletion-workflow",
            "idempotency_key": None,
            "request_sha256": None,
            "revision": next_revision(session),
        }
    )
    session.add(new)
    session.flush()
    write_projection(session, new)


def purge_primary_memories(session: Session, job: DeletionJob, batch: int) -> BatchResult:
    """Scrub the content of every covered version; ids and content hashes stay as evidence."""
    scope, revision = scope_of(job), job.barrier_revision
    rows = session.execute(
        select(Memory)
        .where(memories_in(scope, job.tenant_id, revision), Memory.purged_at.is_(None))
        .limit(batch)
        .with_for_update(skip_locked=True)
    ).scalars().all()
    hashes = [_sha256(row.content) for row in rows]
    for row in rows:
        row.status = Status.DELETED.value
        row.content = ""
        row.abstract = ""
        row.overview = None
        row.key = None
        row.evidence_refs = []
        row.purged_at = func.now()
    session.flush()
    return BatchResult(len(rows), len(rows) < batch, {"versions_scrubbed": len(rows), "content_sha256": hashes[:20]})


def purge_search_projection(session: Session, job: DeletionJob, batch: int) -> BatchResult:
    """Delete the lexical tokens, lexeme postings, trigram text and embedding of every covered memory."""
    scope, revision = scope_of(job), job.barrier_revision
    covered_ids = select(Memory.memory_id).where(memories_in(scope, job.tenant_id, revision)).distinct()
    rows = session.execute(
        select(MemorySearch.memory_id, MemorySearch.embedding.isnot(None).label("has_vector"))
        .where(MemorySearch.tenant_id == job.tenant_id, MemorySearch.memory_id.in_(covered_ids))
        .limit(batch)
    ).all()
    ids = [row.memory_id for row in rows]
    postings = delete_projection(session, job.tenant_id, ids) if ids else 0
    # Postings of a covered memory whose search row is already gone (a write racing an earlier purge) go
    # too, a batch of memories at a time, so the purge always clears what verification will look for.
    orphaned = session.execute(
        select(MemoryLexeme.memory_id)
        .where(MemoryLexeme.tenant_id == job.tenant_id, MemoryLexeme.memory_id.in_(covered_ids),
               ~exists().where(MemorySearch.tenant_id == MemoryLexeme.tenant_id,
                               MemorySearch.memory_id == MemoryLexeme.memory_id))
        .distinct().limit(batch)
    ).scalars().all()
    if orphaned:
        postings += session.execute(
            delete(MemoryLexeme).where(MemoryLexeme.tenant_id == job.tenant_id, MemoryLexeme.memory_id.in_(orphaned))
        ).rowcount
    vectors = sum(1 for row in rows if row.has_vector)
    return BatchResult(len(ids) + len(orphaned), len(ids) < batch and len(orphaned) < batch,
                       {"lexical_rows": len(ids), "lexeme_postings": postings, "vectors": vectors})


def purge_audit_bodies(session: Session, job: DeletionJob, batch: int) -> BatchResult:
    """Audit entries about covered memories keep their ids and hashes; any other detail goes."""
    scope, revision = scope_of(job), job.barrier_revision
    covered_ids = select(Memory.memory_id).where(memories_in(scope, job.tenant_id, revision)).distinct()
    entries = session.execute(
        select(AuditEntry)
        .where(
            AuditEntry.tenant_id == job.tenant_id,
            AuditEntry.memory_id.in_(covered_ids),
            AuditEntry.detail != cast({}, JSONB),
            AuditEntry.job_id.is_distinct_from(job.job_id),
        )
        .limit(batch)
        .with_for_update(skip_locked=True)
    ).scalars().all()
    for entry in entries:
        entry.detail = {key: value for key, value in entry.detail.items() if key.endswith("sha256")}
    session.flush()
    return BatchResult(len(entries), len(entries) < batch, {"audit_entries_scrubbed": len(entries)})


def purge_probes(session: Session, job: DeletionJob, batch: int) -> BatchResult:
    """Verification is over: drop the transient copy it searched with."""
    removed = session.execute(
        delete(DeletionProbe).where(DeletionProbe.tenant_id == job.tenant_id, DeletionProbe.job_id == job.job_id)
    ).rowcount
    return BatchResult(removed, True, {"probes_removed": removed})


PURGERS: dict[Layer, Callable[[Session, DeletionJob, int], BatchResult]] = {
    Layer.SOURCE_EVENTS: purge_source_events,
    Layer.DERIVED_MEMORIES: purge_derived_memories,
    Layer.PRIMARY_MEMORIES: purge_primary_memories,
    Layer.SEARCH_PROJECTION: purge_search_projection,
    Layer.AUDIT_BODIES: purge_audit_bodies,
    Layer.VERIFICATION_PROBES: purge_probes,
}

__all__ = ["PURGERS", "BatchResult", "evidence_link", "scope_of"]
