"""Deletion activities: each purge batch is its own transaction and checkpoint.

``FaultPlan`` lets a test or a chaos drill make a layer fail or hang on purpose;
production workers run with an empty plan.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from sqlalchemy import Engine, select
from temporalio import activity
from temporalio.exceptions import ApplicationError

from memory.db import tenant_session
from memory.deletion.jobs import JobStatus, Layer, get_job, record_layer, reset_failed_layers, transition
from memory.deletion.layers import PURGERS
from memory.deletion.verify import verify
from memory.models import RetentionHold


@dataclass(frozen=True)
class JobRef:
    tenant_id: str
    job_id: str


@dataclass(frozen=True)
class StatusChange:
    job: JobRef
    status: str
    error: str | None = None


@dataclass(frozen=True)
class LayerRequest:
    job: JobRef
    layer: str


@dataclass(frozen=True)
class LayerOutcome:
    layer: str
    removed: int
    batches: int


@dataclass(frozen=True)
class VerifyOutcome:
    clean: bool
    probes: int
    hits: dict[str, int]


@dataclass
class FaultPlan:
    """Faults to inject per layer: ``fail`` raises that many times, ``permanent`` raises a non-retryable
    error, ``hang_after_first_batch`` commits one batch and then stops making progress (heartbeating),
    as a worker that is about to be killed mid-purge would."""

    fail: dict[str, int] = field(default_factory=dict)
    permanent: set[str] = field(default_factory=set)
    hang_after_first_batch: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_spec(cls, spec: str) -> FaultPlan:
        """``"hang-after-first-batch:primary_memories,fail:search_projection"`` (settings: MNEMO_DELETION_FAULTS)."""
        plan = cls()
        for item in filter(None, (part.strip() for part in spec.split(","))):
            kind, _, layer = item.partition(":")
            Layer(layer)  # a typo is an error, not a silently ignored fault
            if kind == "hang-after-first-batch":
                plan.hang_after_first_batch.add(layer)
            elif kind == "fail":
                plan.fail[layer] = plan.fail.get(layer, 0) + 1
            elif kind == "permanent":
                plan.permanent.add(layer)
            else:
                raise ValueError(f"unknown deletion fault {kind!r}; use hang-after-first-batch, fail or permanent")
        return plan

    def after_batch(self, layer: str) -> None:
        while layer in self.hang_after_first_batch:
            activity.heartbeat("hanging on purpose (fault injection)")
            time.sleep(0.2)

    def check(self, layer: str) -> None:
        if layer in self.permanent:
            raise ApplicationError(f"injected permanent failure in {layer}", type="PurgeBlocked", non_retryable=True)
        with self.lock:
            remaining = self.fail.get(layer, 0)
            if remaining:
                self.fail[layer] = remaining - 1
        if remaining:
            raise RuntimeError(f"injected transient failure in {layer}")


class DeletionActivities:
    def __init__(self, engine: Engine, *, batch_size: int = 500, faults: FaultPlan | None = None) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self.faults = faults or FaultPlan()

    @activity.defn(name="deletion_set_status")
    def set_status(self, change: StatusChange) -> None:
        with tenant_session(self.engine, change.job.tenant_id) as session:
            job = get_job(session, change.job.tenant_id, uuid.UUID(change.job.job_id), lock=True)
            status = JobStatus(change.status)
            if status is JobStatus.RUNNING:
                reset_failed_layers(session, job.tenant_id, job.job_id)
            transition(session, job, status, error=change.error)

    @activity.defn(name="deletion_active_holds")
    def active_holds(self, ref: JobRef) -> list[str]:
        """Retention holds and legal holds on the subject; while any is active, nothing is purged."""
        with tenant_session(self.engine, ref.tenant_id) as session:
            job = get_job(session, ref.tenant_id, uuid.UUID(ref.job_id))
            holds = session.execute(
                select(RetentionHold.hold_id).where(
                    RetentionHold.tenant_id == ref.tenant_id,
                    RetentionHold.user_id == job.subject_user_id,
                    RetentionHold.released_at.is_(None),
                )
            ).scalars()
            return [str(hold) for hold in holds]

    @activity.defn(name="deletion_purge_layer")
    def purge_layer(self, request: LayerRequest) -> LayerOutcome:
        """Batches until the layer is empty; each batch commits with its checkpoint, so a retry resumes."""
        layer = Layer(request.layer)
        job_id = uuid.UUID(request.job.job_id)
        removed = batches = 0
        try:
            self.faults.check(layer.value)
            while True:
                with tenant_session(self.engine, request.job.tenant_id) as session:
                    job = get_job(session, request.job.tenant_id, job_id)
                    result = PURGERS[layer](session, job, self.batch_size)
                    record_layer(
                        session,
                        job.tenant_id,
                        job_id,
                        layer,
                        status="done" if result.done else "running",
                        removed=result.removed,
                        remaining=0 if result.done else None,
                        evidence=result.evidence,
                    )
                removed += result.removed
                batches += 1
                activity.heartbeat(batches)
                if result.done:
                    return LayerOutcome(layer.value, removed, batches)
                self.faults.after_batch(layer.value)
        except Exception as exc:
            with tenant_session(self.engine, request.job.tenant_id) as session:
                record_layer(session, request.job.tenant_id, job_id, layer, status="failed", evidence={"error": str(exc)})
            raise

    @activity.defn(name="deletion_verify")
    def verify(self, ref: JobRef) -> VerifyOutcome:
        with tenant_session(self.engine, ref.tenant_id) as session:
            job = get_job(session, ref.tenant_id, uuid.UUID(ref.job_id))
            result = verify(session, job)
        return VerifyOutcome(result.clean, result.probes, result.hits)
