"""Re-apply deletions after a restore, so an old backup cannot bring deleted data back.

The live database's deletions (their jobs, layers, tombstones and fingerprints) are carried into the
restored one, and each job is purged again there through the very purge code the workflow runs
(:data:`memory.deletion.layers.PURGERS`, every layer, batch by batch until done): every layer a deletion
reaches live (events, memories and what was derived from them, summaries, commits and their abstracts,
sessions, records with their search rows and bodies, the search projection, audit bodies) is reached
again. Then the residue scan (:mod:`memory.deletion.residue`) looks for every job's fingerprints; a copy
left means the restore must not go live.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore
from memory.deletion.jobs import PURGE_LAYERS, JobStatus
from memory.deletion.layers import PURGERS
from memory.deletion.residue import Copy, scan
from memory.models import DeletionFingerprint, DeletionJob, DeletionLayer, Tombstone
from memory.resources.bodies import record_store
from memory.resources.body_store import bind_store

BATCH = 500


@dataclass(frozen=True)
class TombstoneRecord:
    """A tombstone carried from the live database into a restored one."""

    target_type: str
    target_id: str
    owner_user_id: str
    job_id: str
    revision: int


@dataclass(frozen=True)
class Carried:
    """One tenant's deletions, as the live database has them."""

    tombstones: list[TombstoneRecord]
    jobs: list[dict[str, Any]] = field(default_factory=list)
    layers: list[dict[str, Any]] = field(default_factory=list)
    fingerprints: list[dict[str, Any]] = field(default_factory=list)


def _columns(row: object, model: type[Any]) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in model.__table__.columns}


def export_tombstones(session: Session, tenant_id: str) -> list[TombstoneRecord]:
    rows = session.execute(select(Tombstone).where(Tombstone.tenant_id == tenant_id)).scalars()
    return [TombstoneRecord(t.target_type, t.target_id, t.owner_user_id, str(t.job_id), t.revision) for t in rows]


def export_deletions(session: Session, tenant_id: str) -> Carried:
    """Everything a restored database needs to forget again what the live one forgot."""
    return Carried(
        tombstones=export_tombstones(session, tenant_id),
        jobs=[_columns(j, DeletionJob) for j in session.execute(
            select(DeletionJob).where(DeletionJob.tenant_id == tenant_id)).scalars()],
        layers=[_columns(row, DeletionLayer) for row in session.execute(
            select(DeletionLayer).where(DeletionLayer.tenant_id == tenant_id)).scalars()],
        fingerprints=[_columns(f, DeletionFingerprint) for f in session.execute(
            select(DeletionFingerprint).where(DeletionFingerprint.tenant_id == tenant_id)).scalars()],
    )


def _carry(session: Session, model: type[Any], rows: list[dict[str, Any]]) -> None:
    for start in range(0, len(rows), BATCH):
        session.execute(insert(model).values(rows[start : start + BATCH]).on_conflict_do_nothing())


def verified_in_backup(session: Session, tenant_id: str) -> set[uuid.UUID]:
    """The jobs a restored archive holds as completed (read before the live ones are carried in): each was verified
    by its scan before the archive was taken, so the archive holds nothing of theirs. What it holds that came later
    (the subject saying the same words again) is new, not a remnant: scanned for those jobs' fingerprints, it was
    taken for one, and a restore refused (found by the wall)."""
    return set(session.execute(select(DeletionJob.job_id).where(
        DeletionJob.tenant_id == tenant_id, DeletionJob.status == JobStatus.COMPLETED.value)).scalars())


def reapply(session: Session, tenant_id: str, carried: Carried, artifacts: ArtifactStore) -> int:
    """Carry the deletions in and purge every job's layers again, oldest barrier first. Returns rows purged."""
    for tomb in carried.tombstones:
        session.execute(
            insert(Tombstone)
            .values(tenant_id=tenant_id, target_type=tomb.target_type, target_id=tomb.target_id,
                    owner_user_id=tomb.owner_user_id, job_id=uuid.UUID(tomb.job_id), revision=tomb.revision)
            # the live tombstone is the newer word on a target deleted twice
            .on_conflict_do_update(index_elements=["tenant_id", "target_type", "target_id", "owner_user_id"],
                                   set_={"job_id": uuid.UUID(tomb.job_id), "revision": tomb.revision})
        )
    _carry(session, DeletionJob, carried.jobs)
    _carry(session, DeletionLayer, carried.layers)
    _carry(session, DeletionFingerprint, carried.fingerprints)
    bind_store(session, record_store(artifacts, tenant_id))
    live = {uuid.UUID(str(j["job_id"])) for j in carried.jobs}
    jobs = session.execute(
        select(DeletionJob).where(DeletionJob.tenant_id == tenant_id, DeletionJob.job_id.in_(live))
        .order_by(DeletionJob.barrier_revision)
    ).scalars().all()
    purged = 0
    for job in jobs:
        for layer in PURGE_LAYERS:
            while True:
                result = PURGERS[layer](session, job, BATCH)
                purged += result.removed
                if result.done:
                    break
    session.flush()
    return purged


def residue(session: Session, tenant_id: str, artifacts: ArtifactStore,
            verified: Collection[uuid.UUID] = ()) -> list[Copy]:
    """The residue scan of the restored tenant for every deletion's fingerprints but the ``verified`` jobs'
    (:func:`verified_in_backup`): the copies left, if any."""
    subjects = {row.job_id: row.subject_user_id for row in session.execute(
        select(DeletionJob.job_id, DeletionJob.subject_user_id).where(DeletionJob.tenant_id == tenant_id))
        if row.job_id not in verified}
    return [copy for copies in scan(session, tenant_id, artifacts, subjects).values() for copy in copies]


__all__ = ["Carried", "TombstoneRecord", "export_deletions", "export_tombstones", "reapply", "residue",
           "verified_in_backup"]
