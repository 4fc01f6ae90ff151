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

from sqlalchemy import ColumnElement, and_, cast, delete, exists, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, insert
from sqlalchemy.orm import Session
from sqlalchemy.types import Text

from memory.db import affected_rows
from memory.deletion.jobs import Layer
from memory.deletion.knowledge_layer import purge_knowledge
from memory.deletion.record_layer import purge_source_records
from memory.deletion.scope import ScopeType, events_in, evidence_link, linked_refs, memories_in, scope_of
from memory.deletion.session_layer import purge_derived_summaries
from memory.enums import Status
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
from memory.store.events import next_revision
from memory.store.projection import delete_projection, write_projection


@dataclass(frozen=True)
class BatchResult:
    removed: int
    done: bool
    evidence: dict[str, Any] = field(default_factory=dict)




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
            marked += affected_rows(session.execute(
                insert(RebuildBlock)
                .values(
                    tenant_id=job.tenant_id, event_id=event_id, memory_id=uuid.UUID(scope.target_id), job_id=job.job_id
                )
                .on_conflict_do_nothing()
            ))
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


@dataclass(frozen=True)
class Derived:
    """A current memory whose evidence points into a deletion, and whether anything else supports it."""

    head: Memory
    orphaned: bool
    """Every one of its ``evidence_refs`` is a deleted record: the memory goes with them."""


def _evidence_only_in(links: list[str]) -> ColumnElement[bool]:
    """The rule, in one place: all of a memory's evidence links are among ``links`` (:func:`derived_from`
    asks only about memories citing at least one of them)."""
    return Memory.evidence_refs.op("<@")(cast(links, JSONB))


def derived_from(
    session: Session, tenant_id: str, links: list[str], *, orphaned_only: bool = False,
    limit: int | None = None, lock: bool = False,
) -> list[Derived]:
    """Current (not superseded, not deleted) memories citing any of ``links`` as evidence.

    The barrier hides the orphaned ones in its own transaction (:func:`hide_orphans`); the purge deletes
    them and re-derives the others (:func:`purge_derived_memories`). Both ask this function, so the two
    can never disagree about which memory goes.
    """
    if not links:
        return []
    orphaned = _evidence_only_in(links)
    statement = select(Memory, orphaned.label("orphaned")).where(
        Memory.tenant_id == tenant_id,
        Memory.status.notin_([Status.SUPERSEDED.value, Status.DELETED.value]),
        Memory.evidence_refs.op("?|")(cast(links, ARRAY(Text))),
    )
    if orphaned_only:
        statement = statement.where(orphaned)
    if limit is not None:
        statement = statement.limit(limit)
    if lock:
        statement = statement.with_for_update(of=Memory, skip_locked=True)
    return [Derived(row.Memory, bool(row.orphaned)) for row in session.execute(statement)]


def hide_orphans(session: Session, job: DeletionJob, links: list[str], revision: int) -> list[uuid.UUID]:
    """Tombstone and mark DELETED every memory whose evidence is only deleted records, transitively.

    A memory derived only from a memory hidden here is itself left with nothing but deleted evidence,
    so each round adds the memories it hid to the deleted links, until a round finds none. Content is
    scrubbed later, by the purge; from this transaction's commit on, no read or recall returns them.
    """
    deleted = list(dict.fromkeys(links))
    hidden: list[uuid.UUID] = []
    while True:
        orphans = derived_from(session, job.tenant_id, deleted, orphaned_only=True)
        if not orphans:
            return hidden
        for orphan in orphans:
            _hide(session, job, orphan.head, revision)
            hidden.append(orphan.head.memory_id)
            deleted.append(evidence_link("memory", orphan.head.memory_id))
        session.flush()


def _hide(session: Session, job: DeletionJob, head: Memory, revision: int) -> None:
    session.execute(
        insert(Tombstone)
        .values(
            tenant_id=job.tenant_id,
            target_type="memory",
            target_id=str(head.memory_id),
            owner_user_id=head.owner_id,
            job_id=job.job_id,
            revision=revision,
        )
        .on_conflict_do_nothing()
    )
    session.execute(
        update(Memory)
        .where(Memory.tenant_id == head.tenant_id, Memory.memory_id == head.memory_id)
        .values(status=Status.DELETED.value)
    )


def derived_deleted_by(job: DeletionJob) -> ColumnElement[bool]:
    """Memory rows this job deleted because they were derived from its scope (not the scope's own rows).

    Lineage, not a column: the barrier and the purge tombstone every memory they delete as derived
    (:func:`_hide`), so the tombstones this job wrote are the list. Only a memory scope's own target is
    left out (it has a tombstone of its own). Nothing here reads a column that can be NULL: the negated
    ``memories_in`` it used was unknown for an extracted memory (``session_id`` NULL), which dropped every
    memory a commit extracted from the purge and from its verification (issue 23, finding 1).
    """
    scope = scope_of(job)
    own = [scope.target_id] if scope.type is ScopeType.MEMORY else []
    return and_(
        Memory.tenant_id == job.tenant_id,
        cast(Memory.memory_id, Text).in_(
            select(Tombstone.target_id).where(
                Tombstone.tenant_id == job.tenant_id, Tombstone.job_id == job.job_id,
                Tombstone.target_type == "memory", Tombstone.target_id.notin_(own),
            )
        ),
    )


def deleted_links(session: Session, job: DeletionJob) -> list[str]:
    """Evidence links to what this job deletes: its scope's records and the memories derived only from them."""
    scope = scope_of(job)
    derived = session.execute(select(Memory.memory_id).where(derived_deleted_by(job)).distinct()).scalars()
    links = linked_refs(session, scope, job.tenant_id, job.barrier_revision)
    return list(dict.fromkeys([*links, *(evidence_link("memory", m) for m in derived)]))


def purge_derived_memories(session: Session, job: DeletionJob, batch: int) -> BatchResult:
    """Memories built from the deleted records: gone if that was all their evidence, else re-derived.

    The barrier already hid the orphaned ones (:func:`hide_orphans`); here their content is scrubbed.
    A memory citing a deleted record that the barrier did not hide (it keeps independent evidence, or
    it was written after the barrier) is handled by the same rule: orphaned, it is deleted (its own
    derived memories follow in the next batch); else it gets a new version without the deleted links,
    as a CANDIDATE: its text may have used the deleted facts, so it must be confirmed again before
    recall uses it.
    """
    unscrubbed = session.execute(
        select(Memory)
        .where(derived_deleted_by(job), Memory.purged_at.is_(None))
        .limit(batch)
        .with_for_update(skip_locked=True)
    ).scalars().all()
    scrubbed_ids = {row.memory_id for row in unscrubbed}
    for row in unscrubbed:
        _scrub(row)
    if scrubbed_ids:
        session.flush()
        delete_projection(session, job.tenant_id, scrubbed_ids)
    links = deleted_links(session, job)
    old_versions = _scrub_superseded(session, job.tenant_id, links, batch)
    found = derived_from(session, job.tenant_id, links, limit=batch, lock=True)
    deleted = rederived = 0
    link_set = set(links)
    for derived in found:
        if derived.orphaned:
            _hide(session, job, derived.head, next_revision(session))
            deleted += 1
        else:
            _rederive(session, derived.head, [ref for ref in derived.head.evidence_refs if ref not in link_set])
            rederived += 1
    session.flush()
    done = len(unscrubbed) < batch and len(found) < batch and deleted == 0 and old_versions < batch
    # A memory hidden here is counted when the next batch scrubs it, as the barrier's are.
    return BatchResult(len(scrubbed_ids) + old_versions, done,
                       {"derived_deleted": len(scrubbed_ids), "derived_rederived": rederived,
                        "superseded_versions_scrubbed": old_versions})


def _scrub_superseded(session: Session, tenant_id: str, links: list[str], batch: int) -> int:
    """Older versions citing a deleted record: a later version replaced their text, not their lineage.

    :func:`derived_from` asks about current versions only; a version superseded by a later message
    (``I live in A``, then ``I live in B``) still holds the text of the message it was built from, and its
    memory lives on through the newer version's evidence. Lineage is per version: its text goes, its
    ids and versions stay (issue 23: found by the residue scan)."""
    if not links:
        return 0
    rows = session.execute(
        select(Memory).where(
            Memory.tenant_id == tenant_id, Memory.status == Status.SUPERSEDED.value, Memory.purged_at.is_(None),
            Memory.evidence_refs.op("?|")(cast(links, ARRAY(Text))),
        ).limit(batch).with_for_update(skip_locked=True)
    ).scalars().all()
    for row in rows:
        _scrub(row)
    session.flush()
    return len(rows)


def scrubbed_columns() -> dict[str, Any]:
    """A purged memory version's columns: its text and all that points into it gone (the quote's offset
    too: the database keeps it inside the content). Ids, versions and revisions stay as evidence. A restore
    runs these same purgers again (:mod:`memory.deletion.reapply`)."""
    return {"status": Status.DELETED.value, "content": "", "quote_start": None, "abstract": "", "overview": None,
            "key": None, "evidence_refs": cast([], JSONB), "purged_at": func.now()}


def _scrub(row: Memory) -> None:
    for column, value in scrubbed_columns().items():
        setattr(row, column, value)


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
        _scrub(row)
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
        postings += affected_rows(session.execute(
            delete(MemoryLexeme).where(MemoryLexeme.tenant_id == job.tenant_id, MemoryLexeme.memory_id.in_(orphaned))
        ))
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
    removed = affected_rows(session.execute(
        delete(DeletionProbe).where(DeletionProbe.tenant_id == job.tenant_id, DeletionProbe.job_id == job.job_id)
    ))
    return BatchResult(removed, True, {"probes_removed": removed})



PURGERS: dict[Layer, Callable[[Session, DeletionJob, int], BatchResult]] = {
    Layer.SOURCE_EVENTS: purge_source_events,
    Layer.KNOWLEDGE: lambda session, job, batch: BatchResult(
        *purge_knowledge(session, job, batch, deleted_links(session, job))),
    Layer.SOURCE_RECORDS: lambda session, job, batch: BatchResult(*purge_source_records(session, job, batch)),
    Layer.DERIVED_MEMORIES: purge_derived_memories,
    Layer.DERIVED_SUMMARIES: lambda session, job, batch: BatchResult(*purge_derived_summaries(session, job, batch)),
    Layer.PRIMARY_MEMORIES: purge_primary_memories,
    Layer.SEARCH_PROJECTION: purge_search_projection,
    Layer.AUDIT_BODIES: purge_audit_bodies,
    Layer.VERIFICATION_PROBES: purge_probes,
}

__all__ = [
    "PURGERS",
    "BatchResult",
    "Derived",
    "deleted_links",
    "derived_deleted_by",
    "derived_from",
    "evidence_link",
    "hide_orphans",
]
