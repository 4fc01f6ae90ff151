"""What a deletion does to source records: the ``source_records`` layer and its verification.

A subject deletion covers every record its subject owns, written up to the barrier's revision (later
writes are new data). The barrier hides them at once (:func:`memory.resources.records.not_forgotten`
reads its tombstone); the purge deletes the record rows, and with them (the foreign keys cascade) their
search projection rows and long-field metadata, and deletes from the tenant's artifact store every body
that no remaining record of the tenant references. The bodies' sha256s are kept in the layer's evidence,
so verification can look for each in the store afterwards; once it passed, only their count stays
(:func:`forget_known_bodies`). A subject deletion also empties the tenant's
store of what no record references at all, from before its barrier (:func:`_orphans`): bytes a crash left
between writing them and committing the record, whoever's they were. (A write to the store is atomic, so
there is no half-written artifact to sweep.)

The store is outside the database transaction: bodies are deleted under the locks of
:mod:`memory.resources.body_store`, which a record write naming the same bytes takes too.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, delete, false, func, select, tuple_
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore
from memory.deletion.scope import ScopeType
from memory.models import DeletionJob, DeletionLayer
from memory.resources.body_store import bound_store, drop_unreferenced, referenced
from memory.resources.models import ResourceArtifact, ResourceRecord, ResourceSearch

LAYER = "source_records"


def _one_record(job: DeletionJob) -> tuple[str, str]:
    resource, record_id = str(job.scope["record"]).split(":", 1)
    return resource, record_id


def records_in(job: DeletionJob) -> ColumnElement[bool]:
    """Record rows the job covers, written at or before its barrier: a subject's, or the one record it names."""
    mine = and_(ResourceRecord.tenant_id == job.tenant_id, ResourceRecord.owner_id == job.subject_user_id,
                ResourceRecord.revision <= job.barrier_revision)
    if job.scope_type == ScopeType.SUBJECT.value:
        return mine
    if job.scope_type == ScopeType.RECORD.value:
        resource, record_id = _one_record(job)
        return and_(mine, ResourceRecord.resource == resource, ResourceRecord.record_id == record_id)
    return false()  # a memory, an event or a session names no record


def _projection_in(job: DeletionJob) -> ColumnElement[bool]:
    """Projection rows of covered records, found by their own columns: they are counted even without a record."""
    mine = and_(ResourceSearch.tenant_id == job.tenant_id, ResourceSearch.owner_id == job.subject_user_id,
                ResourceSearch.source_revision <= job.barrier_revision)
    if job.scope_type == ScopeType.SUBJECT.value:
        return mine
    if job.scope_type == ScopeType.RECORD.value:
        resource, record_id = _one_record(job)
        return and_(mine, ResourceSearch.resource == resource, ResourceSearch.record_id == record_id)
    return false()


def _known_bodies(session: Session, job: DeletionJob) -> list[str]:
    evidence = session.execute(
        select(DeletionLayer.evidence).where(DeletionLayer.tenant_id == job.tenant_id,
                                             DeletionLayer.job_id == job.job_id, DeletionLayer.layer == LAYER)
    ).scalar_one_or_none() or {}
    return [str(sha) for sha in evidence.get("body_sha256", [])]


def forget_known_bodies(session: Session, job: DeletionJob) -> None:
    """Once verification passed: the layer's evidence keeps how many bodies it checked, not their sha256s (a
    sha256 of a known text tells whether that text was stored, so it is not kept past the deletion)."""
    layer = session.execute(
        select(DeletionLayer).where(DeletionLayer.tenant_id == job.tenant_id, DeletionLayer.job_id == job.job_id,
                                    DeletionLayer.layer == LAYER).with_for_update()
    ).scalar_one_or_none()
    if layer is None or "body_sha256" not in layer.evidence:
        return
    evidence = dict(layer.evidence)
    evidence["record_bodies_verified"] = len(evidence.pop("body_sha256"))
    layer.evidence = evidence
    session.flush()


def purge_source_records(session: Session, job: DeletionJob, batch: int) -> tuple[int, bool, dict[str, Any]]:
    """One batch: delete covered records (their projection and body metadata cascade), then their bodies."""
    keys = [tuple(row) for row in session.execute(
        select(ResourceRecord.tenant_id, ResourceRecord.owner_id, ResourceRecord.resource, ResourceRecord.record_id)
        .where(records_in(job)).limit(batch).with_for_update(skip_locked=True)
    )]
    columns = (ResourceRecord.tenant_id, ResourceRecord.owner_id, ResourceRecord.resource, ResourceRecord.record_id)
    shas: list[str] = []
    projection_rows = 0
    if keys:
        shas = list(session.execute(
            select(ResourceArtifact.sha256).where(tuple_(ResourceArtifact.tenant_id, ResourceArtifact.owner_id,
                                                         ResourceArtifact.resource, ResourceArtifact.record_id)
                                                  .in_(keys)).distinct()
        ).scalars())
        projection_rows = session.execute(
            select(func.count()).select_from(ResourceSearch).where(
                tuple_(ResourceSearch.tenant_id, ResourceSearch.owner_id, ResourceSearch.resource,
                       ResourceSearch.record_id).in_(keys))
        ).scalar_one()
        session.execute(delete(ResourceRecord).where(tuple_(*columns).in_(keys)))
    # Projection rows left without their record (none while the foreign key cascades): gone all the same.
    projection_rows += session.execute(delete(ResourceSearch).where(_projection_in(job))).rowcount  # type: ignore[attr-defined]
    known = _known_bodies(session, job)
    # Every body this job has seen is checked again: one a concurrent write still named last time may be free now.
    candidates = list(dict.fromkeys([*known, *shas]))
    removed_bodies = drop_unreferenced(session, bound_store(session), job.tenant_id, candidates) if candidates else 0
    done = len(keys) < batch
    evidence: dict[str, Any] = {"records_deleted": len(keys), "record_projection_rows": projection_rows,
                                "record_bodies_deleted": removed_bodies, "body_sha256": candidates}
    if done and job.scope_type == ScopeType.SUBJECT.value:
        orphans = _orphans(session, bound_store(session), job, set(candidates))
        evidence["record_orphan_bodies_deleted"] = drop_unreferenced(session, bound_store(session), job.tenant_id,
                                                                     orphans[:batch])
        done = len(orphans) <= batch
    return len(keys), done, evidence


def _orphans(session: Session, store: ArtifactStore, job: DeletionJob, known: set[str]) -> list[str]:
    """What the tenant's store holds from before the barrier that no record references: bytes written by a
    request that never committed, or replaced by an update whose clean-up did not run. Whose they were cannot be
    told, so a subject deletion takes them all. One written after the barrier (the store's clock, which for the
    PostgreSQL store is the database's, like the barrier's) is not covered: it is new data, or a write still in
    flight (a write names its bytes only after taking their lock, :func:`guard_bodies`, which
    :func:`drop_unreferenced` waits for). ``known`` are the bodies of the job's own records, counted apart."""
    bodies = [stored.sha256 for stored in store.list()
              if stored.written_at < job.barrier_at and stored.sha256 not in known]
    referenced = set(session.execute(
        select(ResourceArtifact.sha256).where(ResourceArtifact.tenant_id == job.tenant_id,
                                              ResourceArtifact.sha256.in_(bodies))
    ).scalars()) if bodies else set()
    return [sha for sha in bodies if sha not in referenced]


def record_hits(session: Session, job: DeletionJob) -> dict[str, int]:
    """Verification: covered records, their projection rows, bodies of theirs the store still holds that no
    remaining record of the tenant references, and, for a subject, any other unreferenced body the tenant's store
    holds from before the barrier."""
    hits = {
        "records": session.execute(select(func.count()).select_from(ResourceRecord).where(records_in(job)))
        .scalar_one(),
        "record_projection_rows": session.execute(
            select(func.count()).select_from(ResourceSearch).where(_projection_in(job))
        ).scalar_one(),
    }
    known = _known_bodies(session, job)
    if known:
        store = bound_store(session)
        hits["record_bodies"] = sum(
            1 for sha in known if store.exists(sha) and not referenced(session, job.tenant_id, sha)
        )
    if job.scope_type == ScopeType.SUBJECT.value:
        hits["record_orphan_bodies"] = len(_orphans(session, bound_store(session), job, set(known)))
    return hits


__all__ = ["forget_known_bodies", "purge_source_records", "record_hits", "records_in"]
