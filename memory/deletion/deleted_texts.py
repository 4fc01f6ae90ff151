"""What the barrier fingerprints: the texts a deletion removes, found by lineage, minus what it keeps.

Deleted: the covered memory versions and every memory hidden as derived from the scope (their content
and abstract), the covered events' message texts, the covered records' field values. Kept:
the texts of the events the deletion leaves standing that those memories were built from (a deleted
memory's own messages stay; a re-derived memory keeps its other evidence), and the subject's other
messages and records, so the scan never reports the same words said again elsewhere as copies.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Select, func, select, text
from sqlalchemy.orm import Session

from memory import offload
from memory.deletion.fingerprints import MAX_SHINGLES_PER_JOB, fingerprint, salt_of, strings
from memory.deletion.index_fingerprints import Kind, lexeme_fingerprints
from memory.deletion.layers import derived_from
from memory.deletion.record_layer import records_in
from memory.deletion.scope import Scope, ScopeType, events_in, evidence_link, linked_refs, memories_in
from memory.models import DeletionJob, Memory, MemoryEvent
from memory.resources.models import ResourceRecord

STRUCTURAL_KEYS = frozenset({"role", "created_at", "idempotency_key", "tool_call_id", "call_id", "context_refs"})
"""Event payload fields that are labels, ids or times, not what the person said."""
OFFLOAD_FROM_CHARS = 20_000
"""Deleted and kept texts of at least this many characters are fingerprinted in the CPU pool (:mod:`memory.offload`):
for a subject with 2,000 messages it is ~0.3 s of CPU that slowed every request of the API process (issue 23,
finding 7); less is done in place, rather than wait behind the large ones."""
BARRIER_PATIENCE_SECONDS = 5.0
"""How long a barrier waits for the CPU pool before it hashes in place. The pool runs in the idle class: on a core
every other process keeps busy it could wait without end, while the barrier holds the subject's epoch (the
subject's writes wait) and a connection of the API's pool."""
MAX_KEPT_ROWS = 20_000
"""The subject's most recent kept messages and records read for what to leave out of the fingerprints."""


def payload_texts(payload: object) -> list[str]:
    """The said text of an event payload: every string but the structural fields'."""
    if isinstance(payload, dict):
        return [s for key, value in payload.items() if key not in STRUCTURAL_KEYS for s in payload_texts(value)]
    return list(strings(payload))


def _memory_texts(rows: Iterable[Memory]) -> list[str]:
    """Content and abstract: what was said. Not the overview: generated lines (category, slot, ``source: user,
    <time>``) that every memory of a stage shares, which made another memory's overview look like a copy (the
    quoted content an overview may carry is fingerprinted as the content)."""
    return [t for row in rows for t in (row.content, row.abstract) if t]


def store_fingerprints(session: Session, job: DeletionJob, scope: Scope, hidden: list[uuid.UUID], *,
                       read_apart: bool = False) -> int:
    """Fingerprint what the job deletes (in the barrier's transaction), as text and as the search indexes hold
    it (:mod:`.index_fingerprints`); how many hashes were stored. ``read_apart``: nothing of the subject's is
    uncommitted in this transaction, so a large set of kept words may be read on the pool's own connection."""
    tenant, revision = job.tenant_id, job.barrier_revision
    memories = list(session.execute(select(Memory).where(memories_in(scope, tenant, revision))).scalars())
    memories += session.execute(
        select(Memory).where(Memory.tenant_id == tenant, Memory.memory_id.in_(hidden))).scalars().all()
    deleted_events = {row.event_id: row.payload for row in session.execute(
        select(MemoryEvent.event_id, MemoryEvent.payload).where(events_in(scope, tenant, revision)))}
    texts = _memory_texts(memories) + [t for payload in deleted_events.values() for t in payload_texts(payload)]
    texts += [t for data in session.execute(select(ResourceRecord.data).where(records_in(job))).scalars()
              for t in strings(data)]
    # Lineage upwards: events cited by what goes, or by what is re-derived, that the deletion keeps.
    links = [*linked_refs(session, scope, tenant, revision), *(evidence_link("memory", m) for m in hidden)]
    rederived = [d.head for d in derived_from(session, tenant, links) if not d.orphaned]
    cited = {ref.removeprefix("event:") for row in [*memories, *rederived]
             for ref in [row.source_id, *row.evidence_refs] if ref.startswith("event:")}
    kept_ids = [uuid.UUID(e) for e in cited if _is_uuid(e) and uuid.UUID(e) not in deleted_events]
    kept = [t for payload in session.execute(select(MemoryEvent.payload).where(
        MemoryEvent.tenant_id == tenant, MemoryEvent.event_id.in_(kept_ids))).scalars() for t in payload_texts(payload)]
    kind_of, numbers, shingles = _columns(session, job, scope, texts, kept, frozenset(deleted_events), read_apart)
    # Two arrays, one statement: a multi-row VALUES of 30,000 rows took SQLAlchemy seconds to compile.
    session.execute(text(
        "INSERT INTO deletion_fingerprints (tenant_id, job_id, kind, text_no, shingle) "
        "SELECT :tenant, :job, unnest(CAST(:kinds AS text[])), unnest(CAST(:numbers AS integer[])), "
        "unnest(CAST(:shingles AS bigint[])) ON CONFLICT DO NOTHING"),
        {"tenant": tenant, "job": job.job_id, "kinds": kind_of, "numbers": numbers, "shingles": shingles})
    return len(shingles)


def fingerprint_columns(salt: bytes, texts: list[str], kept: list[str]) -> tuple[list[str], list[int], list[int]]:
    """The job's fingerprints of every kind as three columns (kind, text number, hash): a pure function of the
    texts, so that a large one runs in the CPU pool."""
    runs, windows = lexeme_fingerprints(salt, texts, kept, MAX_SHINGLES_PER_JOB)
    kinds = [(Kind.UNITS, fingerprint(salt, texts, kept)), (Kind.LEXEME_RUNS, runs), (Kind.POSTING_WINDOWS, windows)]
    rows = [(kind.value, number, h) for kind, sets in kinds for number, hashes in enumerate(sets) for h in hashes]
    return [row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows]


def _columns(session: Session, job: DeletionJob, scope: Scope, texts: list[str], kept: list[str],
             deleted_events: frozenset[uuid.UUID], read_apart: bool) -> tuple[list[str], list[int], list[int]]:
    """The fingerprint columns, computed where their size says: in place when small, else in the CPU pool, which
    also reads the subject's other words itself (decoding thousands of payloads in the API's interpreter held it
    for every other tenant's request: issue 23, finding 7)."""
    salt = salt_of(job.job_id)
    size = sum(map(len, texts)) + sum(map(len, kept))
    if scope.type is ScopeType.SUBJECT:  # a subject deletion keeps nothing of the subject's
        return _hashed(salt, texts, kept)
    others = _OthersKept(job.tenant_id, scope.subject, deleted_events, _covered_records(session, job))
    # Read on the pool's connection only when nothing of the subject's is uncommitted here (``read_apart``).
    if read_apart and offload.pooled() and size + others.size(session) >= OFFLOAD_FROM_CHARS:
        bind = session.get_bind()
        engine = bind if isinstance(bind, Engine) else bind.engine
        try:
            return offload.in_tenant(engine, job.tenant_id, _fingerprints_keeping, salt, texts, kept, others,
                                     patience=BARRIER_PATIENCE_SECONDS)
        except offload.PoolBusy:
            return fingerprint_columns(salt, texts, kept + others.read(session))
    return _hashed(salt, texts, kept + others.read(session))


def _hashed(salt: bytes, texts: list[str], kept: list[str]) -> tuple[list[str], list[int], list[int]]:
    """:func:`fingerprint_columns` in the pool when large, in place when small or when the pool keeps the barrier
    (which holds the subject's epoch and its connection) waiting past its patience."""
    small = sum(map(len, texts)) + sum(map(len, kept)) < OFFLOAD_FROM_CHARS
    try:
        return offload.run(fingerprint_columns, salt, texts, kept, inline=small, patience=BARRIER_PATIENCE_SECONDS)
    except offload.PoolBusy:
        return fingerprint_columns(salt, texts, kept)


def _covered_records(session: Session, job: DeletionJob) -> frozenset[tuple[str, str]]:
    return frozenset((row.resource, row.record_id) for row in session.execute(
        select(ResourceRecord.resource, ResourceRecord.record_id).where(records_in(job))))


@dataclass(frozen=True)
class _OthersKept:
    """The subject's own words the deletion keeps (other messages, other records): the same sentence said again
    elsewhere is not a copy of the deleted one. Plain data, so that a pool process can read them on a connection
    of its own when the barrier is its transaction's only write: the barrier holds the subject's epoch, so no
    write of the subject commits meanwhile and that connection sees what the barrier's transaction sees, the
    deletion's own rows left out by id."""

    tenant_id: str
    subject: str
    deleted_events: frozenset[uuid.UUID]
    covered_records: frozenset[tuple[str, str]]

    def _events(self) -> Select[tuple[uuid.UUID, Any]]:
        return (select(MemoryEvent.event_id, MemoryEvent.payload)
                .where(MemoryEvent.tenant_id == self.tenant_id, MemoryEvent.user_id == self.subject,
                       MemoryEvent.purged_at.is_(None))
                .order_by(MemoryEvent.revision.desc()).limit(MAX_KEPT_ROWS))

    def _records(self) -> Select[tuple[str, str, Any]]:
        return (select(ResourceRecord.resource, ResourceRecord.record_id, ResourceRecord.data)
                .where(ResourceRecord.tenant_id == self.tenant_id, ResourceRecord.owner_id == self.subject)
                .order_by(ResourceRecord.revision.desc()).limit(MAX_KEPT_ROWS))

    def size(self, session: Session) -> int:
        """About how many characters they are (their stored bytes), measured by PostgreSQL: nothing is decoded."""
        total = 0
        for query, column in ((self._events(), "payload"), (self._records(), "data")):
            rows = query.subquery()
            stored = func.coalesce(func.sum(func.pg_column_size(rows.c[column])), 0)
            total += session.execute(select(stored)).scalar_one()
        return int(total)

    def read(self, session: Session) -> list[str]:
        kept = [t for row in session.execute(self._events()) if row.event_id not in self.deleted_events
                for t in payload_texts(row.payload)]
        return kept + [t for row in session.execute(self._records())
                       if (row.resource, row.record_id) not in self.covered_records for t in strings(row.data)]


def _fingerprints_keeping(session: Session, salt: bytes, texts: list[str], kept: list[str],
                          others: _OthersKept) -> tuple[list[str], list[int], list[int]]:
    """In a pool process: :func:`fingerprint_columns` of the deleted texts, keeping ``kept`` and the subject's other
    words, read here."""
    return fingerprint_columns(salt, texts, kept + others.read(session))


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


__all__ = ["payload_texts", "store_fingerprints"]
