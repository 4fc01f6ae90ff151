"""Deletion activities: each purge batch is its own transaction and checkpoint.

``FaultPlan`` lets a test or a chaos drill make a layer fail or hang on purpose;
production workers run with an empty plan.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.db import heartbeat_while, heartbeating, shielded_session
from activities.history_scan import HISTORIES_PER_MATCH, copies_in, serialized
from memory import offload
from memory.artifact_store import ArtifactStore
from memory.deletion.fingerprints import Matcher
from memory.deletion.jobs import (
    PURGE_LAYERS,
    JobStatus,
    Layer,
    get_job,
    record_layer,
    reset_failed_layers,
    subject_user,
    transition,
    view_job,
)
from memory.deletion.layers import PURGERS
from memory.deletion.record_layer import forget_known_bodies
from memory.deletion.residue import MAX_COPIES, claim_scan, matchers, scan, workflow_ids
from memory.deletion.verify import verify
from memory.models import RetentionHold
from memory.resources.bodies import record_store
from memory.resources.body_store import bind_store

SCAN_BUSY_RETRY = timedelta(seconds=2)
"""When the tenant's residue scan is taken, a verification is tried again after this long (not holding a slot)."""


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
class PurgeRequest:
    job: JobRef
    again: bool = False
    """Re-run layers already done (after a failed verification)."""


@dataclass(frozen=True)
class FinishRequest:
    """What ``finish`` decides on: the job, and the copies the history scan found (``scan_histories``). A
    workflow started before that scan existed sends only the job's fields; the default keeps it replaying."""

    tenant_id: str
    job_id: str
    history_copies: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class VerifyOutcome:
    clean: bool
    probes: int
    hits: dict[str, int]
    remaining_copies: list[str] = field(default_factory=list)


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
    """Three activities on the happy path (begin, purge, finish): the per-layer, per-batch
    checkpoints live in the database, so one purge activity can resume wherever a crash left it."""

    def __init__(self, engine: Engine, *, artifacts: ArtifactStore, batch_size: int = 500,
                 faults: FaultPlan | None = None) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self.faults = faults or FaultPlan()
        self.artifacts = artifacts
        """Where the record bodies and task artifacts are (the API's artifact store). Required: without it a job
        could not purge or verify record bodies, and would fail only midway."""

    def _bind(self, session: Session, tenant_id: str) -> None:
        bind_store(session, record_store(self.artifacts, tenant_id))

    @activity.defn(name="deletion_begin")
    def begin(self, ref: JobRef) -> list[str]:
        """Active retention/legal holds on the subject: none → running; any → blocked_by_retention."""
        with shielded_session(self.engine, ref.tenant_id) as session:
            job = get_job(session, ref.tenant_id, uuid.UUID(ref.job_id), lock=True)
            subject = subject_user(session, job)  # a hold is on a user's data: shared memories have no such subject
            holds = [
                str(hold)
                for hold in session.execute(
                    select(RetentionHold.hold_id).where(
                        RetentionHold.tenant_id == ref.tenant_id,
                        RetentionHold.user_id == subject,
                        RetentionHold.released_at.is_(None),
                    )
                ).scalars()
            ] if subject is not None else []
            if holds:
                hold = "a retention or legal hold covers this subject"
                transition(session, job, JobStatus.BLOCKED_BY_RETENTION, error=hold)
            else:
                transition(session, job, JobStatus.RUNNING)
            return holds

    @activity.defn(name="deletion_set_status")
    def set_status(self, change: StatusChange) -> None:
        with shielded_session(self.engine, change.job.tenant_id) as session:
            job = get_job(session, change.job.tenant_id, uuid.UUID(change.job.job_id), lock=True)
            status = JobStatus(change.status)
            if status is JobStatus.RUNNING:
                reset_failed_layers(session, job.tenant_id, job.job_id)
            transition(session, job, status, error=change.error)

    @activity.defn(name="deletion_purge")
    def purge(self, request: PurgeRequest) -> dict[str, int]:
        """Purge every layer in order, batch by batch; layers already done are skipped unless ``again``."""
        job_id = uuid.UUID(request.job.job_id)
        with shielded_session(self.engine, request.job.tenant_id) as session:
            layers = view_job(session, request.job.tenant_id, job_id).layers
            done = {layer.layer for layer in layers if layer.status == "done"}
            known = {layer.layer for layer in layers}
        removed: dict[str, int] = {}
        for layer in PURGE_LAYERS:
            if layer.value in done and not request.again:
                continue
            if layer.value not in known:
                continue  # a job accepted before this layer existed: nothing of its kind was in its scope
            try:
                removed[layer.value] = self._purge_layer(request.job.tenant_id, job_id, layer)
            except Exception as exc:
                with shielded_session(self.engine, request.job.tenant_id) as session:
                    record_layer(
                        session, request.job.tenant_id, job_id, layer, status="failed", evidence={"error": str(exc)}
                    )
                raise ApplicationError(
                    f"{layer.value}: {exc}",
                    type="PurgeBlocked" if isinstance(exc, ApplicationError) and exc.non_retryable else "PurgeFailed",
                    non_retryable=isinstance(exc, ApplicationError) and exc.non_retryable,
                ) from exc
        return removed

    def _purge_layer(self, tenant_id: str, job_id: uuid.UUID, layer: Layer) -> int:
        self.faults.check(layer.value)
        removed = 0
        while True:
            with shielded_session(self.engine, tenant_id) as session:
                job = get_job(session, tenant_id, job_id)
                self._bind(session, tenant_id)
                result = PURGERS[layer](session, job, self.batch_size)
                record_layer(
                    session,
                    tenant_id,
                    job_id,
                    layer,
                    status="done" if result.done else "running",
                    removed=result.removed,
                    remaining=0 if result.done else None,
                    evidence=result.evidence,
                )
            removed += result.removed
            activity.heartbeat(layer.value, removed)
            if result.done:
                return removed
            self.faults.after_batch(layer.value)

    @activity.defn(name="deletion_scan_histories")
    async def scan_histories(self, ref: JobRef) -> list[str]:
        """The residue scan of mnemo's own workflow histories of the tenant: their payloads, decoded, matched
        against the job's fingerprints. The tenant's workflow ids come from its rows (every ``workflow_id``
        column); the deletion's own run is skipped (it carries ids and counts only)."""
        job_id = uuid.UUID(ref.job_id)

        def load() -> tuple[dict[uuid.UUID, Matcher], list[str], str]:
            with shielded_session(self.engine, ref.tenant_id) as session:
                job = get_job(session, ref.tenant_id, job_id)
                return matchers(session, ref.tenant_id, [job_id]), workflow_ids(session, ref.tenant_id), job.workflow_id

        found, ids, own = await asyncio.to_thread(load)
        if not found:
            return []
        client = activity.client()
        copies: list[str] = []
        others = [workflow for workflow in ids if workflow != own]
        for start in range(0, len(others), HISTORIES_PER_MATCH):
            fetched: list[tuple[str, bytes]] = []
            for workflow in others[start : start + HISTORIES_PER_MATCH]:
                activity.heartbeat(workflow)
                try:
                    history = await client.get_workflow_handle(workflow).fetch_history()
                except RPCError as exc:
                    if exc.status is RPCStatusCode.NOT_FOUND:  # retention removed it, or it never started
                        continue
                    raise
                fetched.append((workflow, serialized(history)))
            # Decoding and matching is CPU work: in the pool, never on this worker's event loop, which runs every
            # tenant's workflow tasks (a deletion flood's history scans slowed another tenant's commits).
            copies += await heartbeat_while(asyncio.to_thread(offload.run, copies_in, fetched, found[job_id]))
            if len(copies) >= MAX_COPIES:
                break
        return copies[:MAX_COPIES]

    @activity.defn(name="deletion_finish")
    def finish(self, request: FinishRequest) -> VerifyOutcome:
        """Verify: the residue scan (rows, artifact files, and the histories' copies the workflow passes in)
        decides; the older targeted checks must pass too. Only if nothing is found, drop the probes and the
        deleted bodies' sha256s, and complete; otherwise list each copy and fail loudly."""
        ref = JobRef(request.tenant_id, request.job_id)
        job_id = uuid.UUID(ref.job_id)
        with heartbeating(), shielded_session(self.engine, ref.tenant_id) as session:
            if not claim_scan(session, ref.tenant_id):  # another of the tenant's scans runs: its slot is freed
                raise ApplicationError(f"another residue scan of tenant {ref.tenant_id} is running; retried shortly",
                                       type="ResidueScanBusy", next_retry_delay=SCAN_BUSY_RETRY)
            job = get_job(session, ref.tenant_id, job_id, lock=True)
            self._bind(session, ref.tenant_id)
            result = verify(session, job)
            # The scan reads a snapshot of its own after the purge committed, in the CPU pool (~1 s of CPU for a
            # subject with 2,000 messages, which in this interpreter slowed every other tenant's activities).
            found = offload.in_tenant(self.engine, ref.tenant_id, scan, ref.tenant_id, self.artifacts,
                                      {job_id: job.subject_user_id})
            copies = [c.label for c in found.get(job_id, [])]
            copies += request.history_copies
            if result.clean and not copies:
                probes = PURGERS[Layer.VERIFICATION_PROBES](session, job, self.batch_size)
                record_layer(
                    session, ref.tenant_id, job_id, Layer.VERIFICATION_PROBES, status="done",
                    removed=probes.removed, remaining=0,
                    evidence={**probes.evidence, "verified_probes": result.probes, "remaining_copies": []},
                )
                forget_known_bodies(session, job)
                transition(session, job, JobStatus.COMPLETED)
            else:
                record_layer(session, ref.tenant_id, job_id, Layer.VERIFICATION_PROBES, status="failed",
                             remaining=len(copies), evidence={"remaining_copies": copies})
                transition(
                    session,
                    job,
                    JobStatus.FAILED_REQUIRES_ACTION,
                    error=f"verification found deleted data: {result.hits}; remaining copies: {len(copies)}",
                )
        return VerifyOutcome(result.clean and not copies, result.probes, result.hits, copies)
