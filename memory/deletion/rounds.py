"""Verification rounds: one residue scan verifies every deletion of a tenant that waits for it, within a budget.

A residue scan reads every text column of the tenant, its artifact files and its workflow histories, whatever the
job deletes. A flood of k deletions made k such scans, each ~1 s of CPU for a chatty tenant, and the scans, though
in the CPU pool's idle class, still slowed another tenant's commits and reads (the PostgreSQL and Temporal work
they cause runs at normal priority; issue 23, finding 7). So:

- **A round verifies together** every job of the tenant whose purge is done (its verification layer is
  :data:`PURGED`), not only the job whose workflow asked: one read of the tenant for all of them. The other jobs'
  workflows then find their job decided (:func:`settled`) and finish without scanning.
- **A tenant's rounds spend a budget of seconds** (:class:`ScanBudget`): a bucket of ``burst_seconds`` refilled at
  ``share`` seconds a second, from which each round takes its measured duration, failed rounds included. One bucket
  per tenant, in the database, whichever worker runs the round. A few deletions are verified at
  once; a flood is verified in fewer, larger rounds, using at most ``share`` of one core in the long run, and the
  jobs that wait meanwhile are verified together by the next. The barrier already holds at once: only the
  confirmation waits.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, select, text, update
from sqlalchemy.orm import Session

from memory.deletion.jobs import JobStatus, Layer, get_job, record_layer, transition
from memory.deletion.layers import PURGERS
from memory.deletion.record_layer import forget_known_bodies
from memory.deletion.verify import verify
from memory.models import DeletionJob, DeletionLayer

PURGED = "purged"
"""The verification layer's status between the end of the job's purge and its round: what a round collects."""
ROUND_JOBS = 32
"""Jobs one round verifies at most (the rest wait for the next): bounds a round's time and its matchers' memory."""


@dataclass(frozen=True)
class ScanBudget:
    """How much of the worker's time a tenant's verification rounds may take (settings ``MNEMO_RESIDUE_SCAN_*``)."""

    share: float = 0.1
    """Seconds of rounds a tenant earns per second: its long-run share of one core."""
    burst_seconds: float = 2.0
    """Seconds of rounds a tenant may take at once before the share applies."""

    def __post_init__(self) -> None:
        if not 0 < self.share <= 1 or self.burst_seconds <= 0:
            raise ValueError("a scan budget needs 0 < share <= 1 and burst_seconds > 0")


@dataclass(frozen=True)
class Decision:
    """How a job's verification ended: clean (completed) or not (each remaining copy listed)."""

    clean: bool
    probes: int
    hits: dict[str, int]
    remaining_copies: list[str]


def _verification_of(tenant_id: str, job_id: uuid.UUID) -> tuple[ColumnElement[bool], ...]:
    """The job's verification layer: the row every step of a round reads or moves."""
    return (DeletionLayer.tenant_id == tenant_id, DeletionLayer.job_id == job_id,
            DeletionLayer.layer == Layer.VERIFICATION_PROBES.value)


def begin_purge(session: Session, tenant_id: str, job_id: uuid.UUID) -> bool:
    """Whether the job is still to be purged: only a running job is (a purge retried after a round decided its job
    changes nothing). Its verification goes back to waiting for the purge, under the job's lock, so no round takes
    it in while its layers are purged again."""
    job = get_job(session, tenant_id, job_id, lock=True)
    if JobStatus(job.status) is not JobStatus.RUNNING:
        return False
    session.execute(
        update(DeletionLayer).where(*_verification_of(tenant_id, job_id), DeletionLayer.status == PURGED)
        .values(status="pending")
    )
    return True


def mark_purged(session: Session, tenant_id: str, job_id: uuid.UUID) -> None:
    """Every purge layer of the job is done: its verification waits for a round. Only for a running job whose
    verification is not decided (a purge retried after a round completed the job changes nothing)."""
    job = get_job(session, tenant_id, job_id, lock=True)
    if JobStatus(job.status) is JobStatus.RUNNING:
        session.execute(
            update(DeletionLayer)
            .where(*_verification_of(tenant_id, job_id), DeletionLayer.status.in_(("pending", "running")))
            .values(status=PURGED)
        )


def settled(session: Session, tenant_id: str, job_id: uuid.UUID) -> Decision | None:
    """The job's decision when a round has made it (completed, or failed with its copies listed), else None.

    A job's workflow asks for its verification only after its own purge, and a failed job runs again only once
    its workflow set it running: a failed job here was failed by a round after that purge."""
    job = get_job(session, tenant_id, job_id)
    status = JobStatus(job.status)
    if status not in (JobStatus.COMPLETED, JobStatus.FAILED_REQUIRES_ACTION):
        return None
    evidence: dict[str, Any] = session.execute(
        select(DeletionLayer.evidence).where(*_verification_of(tenant_id, job_id))
    ).scalar_one_or_none() or {}
    if status is JobStatus.FAILED_REQUIRES_ACTION and "remaining_copies" not in evidence:
        return None  # failed in its purge, not by a round: its workflow handles that itself
    return Decision(status is JobStatus.COMPLETED, int(evidence.get("verified_probes", 0)),
                    dict(evidence.get("hits", {})), [str(c) for c in evidence.get("remaining_copies", [])])


def waiting_jobs(session: Session, job: DeletionJob) -> list[DeletionJob]:
    """``job`` (locked by the caller) and the tenant's other jobs whose purge is done and whose verification waits,
    locked, skipping any another transaction holds; oldest first, :data:`ROUND_JOBS` in all."""
    others = session.execute(
        select(DeletionJob)
        .join(DeletionLayer, (DeletionLayer.tenant_id == DeletionJob.tenant_id)
              & (DeletionLayer.job_id == DeletionJob.job_id))
        .where(DeletionJob.tenant_id == job.tenant_id, DeletionJob.job_id != job.job_id,
               DeletionJob.status == JobStatus.RUNNING.value,
               DeletionLayer.layer == Layer.VERIFICATION_PROBES.value, DeletionLayer.status == PURGED)
        .order_by(DeletionJob.barrier_at, DeletionJob.job_id)
        .limit(ROUND_JOBS - 1)
        .with_for_update(of=DeletionJob, skip_locked=True)
    ).scalars().all()
    return [job, *others]


def wait_for_budget(session: Session, tenant_id: str, budget: ScanBudget) -> float:
    """Seconds until the tenant may start a round (0: now). Read in the transaction that holds the tenant's scan
    (:func:`memory.deletion.residue.claim_scan`), so rounds spend the bucket one at a time."""
    tokens = session.execute(text(
        "SELECT LEAST(:burst, tokens + :share * EXTRACT(EPOCH FROM (clock_timestamp() - updated_at))) "
        "FROM residue_rounds WHERE tenant_id = :t"),
        {"t": tenant_id, "burst": budget.burst_seconds, "share": budget.share}).scalar_one_or_none()
    return 0.0 if tokens is None or tokens > 0 else float(-tokens) / budget.share + 0.05


MAX_WAIT_SECONDS = 600.0
"""The longest a tenant waits for its next round, however long its last one took (a round of a huge tenant on a busy
machine, measured in wall time, would otherwise leave its deletions unconfirmed for hours)."""


def spend(session: Session, tenant_id: str, seconds: float, jobs: int, budget: ScanBudget) -> None:
    """A round of ``jobs`` jobs took ``seconds``: taken from the tenant's bucket (which may go below zero, down to
    :data:`MAX_WAIT_SECONDS` of refill: the next round waits until it is refilled)."""
    session.execute(text(
        "INSERT INTO residue_rounds (tenant_id, tokens, updated_at, last_seconds, last_jobs, rounds) "
        "VALUES (:t, GREATEST(-:debt, :burst - :s), clock_timestamp(), :s, :jobs, 1) "
        "ON CONFLICT (tenant_id) DO UPDATE SET "
        "tokens = GREATEST(-:debt, LEAST(:burst, residue_rounds.tokens + :share * EXTRACT(EPOCH FROM "
        "(clock_timestamp() - residue_rounds.updated_at))) - :s), "
        "updated_at = clock_timestamp(), last_seconds = :s, last_jobs = :jobs, rounds = residue_rounds.rounds + 1"),
        {"t": tenant_id, "s": seconds, "jobs": jobs, "burst": budget.burst_seconds, "share": budget.share,
         "debt": MAX_WAIT_SECONDS * budget.share})


def decide(session: Session, job: DeletionJob, copies: Sequence[str], batch_size: int, round_jobs: int) -> Decision:
    """Conclude one job of a round: the residue scan's ``copies`` decide, and the targeted checks
    (:mod:`.verify`) must pass too. Clean: drop the probes and the deleted bodies' sha256s and complete; else list
    each copy and fail loudly (failed_requires_action, until an operator resumes it)."""
    result = verify(session, job)
    listed = list(copies)
    # This verification's evidence replaces an earlier one's (after a resume): record_layer adds numbers up.
    session.execute(update(DeletionLayer).where(*_verification_of(job.tenant_id, job.job_id)).values(evidence={}))
    if result.clean and not listed:
        probes = PURGERS[Layer.VERIFICATION_PROBES](session, job, batch_size)
        record_layer(session, job.tenant_id, job.job_id, Layer.VERIFICATION_PROBES, status="done",
                     removed=probes.removed, remaining=0,
                     evidence={**probes.evidence, "verified_probes": result.probes, "remaining_copies": [],
                               "hits": {}, "round_jobs": round_jobs})
        forget_known_bodies(session, job)
        transition(session, job, JobStatus.COMPLETED)
    else:
        record_layer(session, job.tenant_id, job.job_id, Layer.VERIFICATION_PROBES, status="failed",
                     remaining=len(listed), evidence={"remaining_copies": listed, "hits": result.hits,
                                                      "verified_probes": result.probes, "round_jobs": round_jobs})
        transition(session, job, JobStatus.FAILED_REQUIRES_ACTION,
                   error=f"verification found deleted data: {result.hits}; remaining copies: {len(listed)}")
    return Decision(result.clean and not listed, result.probes, result.hits, listed)


__all__ = ["MAX_WAIT_SECONDS", "PURGED", "ROUND_JOBS", "Decision", "ScanBudget", "begin_purge", "decide",
           "mark_purged", "settled", "spend",
           "wait_for_budget", "waiting_jobs"]
