"""Deletion activities: each purge batch is its own transaction and checkpoint.

``FaultPlan`` lets a test or a chaos drill make a layer fail or hang on purpose;
production workers run with an empty plan.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.db import heartbeat_while, shielded_session
from activities.history_scan import Fetch, fetcher, history_copies
from memory import offload
from memory.artifact_store import ArtifactStore
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
from memory.deletion.residue import MAX_COPIES, claim_scan, matchers, scan, workflow_ids
from memory.deletion.rounds import (
    Decision,
    ScanBudget,
    begin_purge,
    decide,
    mark_purged,
    settled,
    spend,
    wait_for_budget,
    waiting_jobs,
)
from memory.models import DeletionJob, RetentionHold
from memory.resources.bodies import record_store
from memory.resources.body_store import bind_store

logger = logging.getLogger("mnemo.worker")
T = TypeVar("T")

SCAN_BUSY_RETRY = timedelta(seconds=2)
"""When the tenant's round is running, a verification is tried again after this long (not holding a slot): by then
the round has usually decided it too."""


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
    checkpoints live in the database, so one purge activity can resume wherever a crash left it; ``finish``
    verifies in a round with the tenant's other purged jobs, within the tenant's ``scan_budget``."""

    def __init__(self, engine: Engine, *, artifacts: ArtifactStore, batch_size: int = 500,
                 faults: FaultPlan | None = None, scan_budget: ScanBudget | None = None) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self.faults = faults or FaultPlan()
        self.scan_budget = scan_budget or ScanBudget()
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
            if not begin_purge(session, request.job.tenant_id, job_id):
                return {}  # a retry after a round decided the job: its finish reports that decision
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
        with shielded_session(self.engine, request.job.tenant_id) as session:
            mark_purged(session, request.job.tenant_id, job_id)  # its verification waits for the tenant's next round
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
        """The residue scan of the tenant's workflow histories for one job. Only workflows started before
        verification rounds call it (before ``finish``); a round scans the histories for all its jobs itself."""
        job_id, fetch = uuid.UUID(ref.job_id), fetcher()

        def scan_one() -> list[str]:
            with shielded_session(self.engine, ref.tenant_id) as session:
                job = get_job(session, ref.tenant_id, job_id)
                found, ids = matchers(session, ref.tenant_id, [job_id]), workflow_ids(session, ref.tenant_id)
            return history_copies(fetch, ids, found, {job_id: job.workflow_id})[job_id] if found else []

        return await heartbeat_while(asyncio.get_running_loop().run_in_executor(round_threads(), scan_one))

    @activity.defn(name="deletion_finish")
    async def finish(self, request: FinishRequest) -> VerifyOutcome:
        """Verify the job in a round (:mod:`memory.deletion.rounds`): unless a round of another job of the tenant
        decided it already, claim the tenant's scan, wait for its budget, and verify every job of the tenant whose
        purge is done by one residue scan of the rows, files and histories, plus each job's targeted checks.

        The round runs in a thread of its own pool (never the event loop's default executor, which the worker's
        other activities share); only the histories' fetches come back to the event loop."""
        decision = await asyncio.to_thread(self._settled, request)  # cheap: never queued behind rounds
        if decision is None:
            fetch = fetcher()
            decision = await heartbeat_while(
                asyncio.get_running_loop().run_in_executor(round_threads(), self._round, request, fetch))
        return VerifyOutcome(decision.clean, decision.probes, decision.hits, decision.remaining_copies)

    def _settled(self, request: FinishRequest) -> Decision | None:
        with shielded_session(self.engine, request.tenant_id) as session:
            return settled(session, request.tenant_id, uuid.UUID(request.job_id))

    def _round(self, request: FinishRequest, fetch: Fetch) -> Decision:
        """Claim the tenant's scan and its budget, then verify every purged job of the tenant in one transaction. A
        job other than the caller's that cannot be decided stays purged for the next round (a savepoint), never
        holding the others back; a round that fails is charged all the same (a transaction of its own)."""
        tenant, job_id = request.tenant_id, uuid.UUID(request.job_id)
        clock: _Stopwatch | None = None
        try:
            with shielded_session(self.engine, tenant) as session:
                if (decided := self._admitted(session, tenant, job_id)) is not None:
                    return decided
                clock = _Stopwatch()
                jobs = waiting_jobs(session, get_job(session, tenant, job_id, lock=True))
                decisions = self._verify(session, jobs, request, fetch, clock)
                spend(session, tenant, clock.total(), len(jobs), self.scan_budget)
        except Exception:
            if clock is not None:
                with shielded_session(self.engine, tenant) as charged:
                    spend(charged, tenant, clock.total(), 1, self.scan_budget)
            raise
        logger.info("verification round", extra={"tenant_id": tenant, "jobs": len(jobs), "histories": clock.histories,
                                                  "clean": sum(d.clean for d in decisions.values()),
                                                  "duration_ms": round(clock.total() * 1000, 1), **clock.laps})
        return decisions[job_id]

    def _admitted(self, session: Session, tenant: str, job_id: uuid.UUID) -> Decision | None:
        """Hold the tenant's scan and check its budget (a :class:`ResidueScanBusy` refusal gives the slot back), or
        the job's decision when the round that just ended made it."""
        if not claim_scan(session, tenant):  # another of the tenant's rounds runs: this slot is freed meanwhile
            raise ApplicationError(f"another residue scan of tenant {tenant} is running; retried shortly",
                                   type="ResidueScanBusy", next_retry_delay=SCAN_BUSY_RETRY)
        if (decided := settled(session, tenant, job_id)) is not None:
            return decided
        if (wait := wait_for_budget(session, tenant, self.scan_budget)) > 0:
            raise ApplicationError(
                f"tenant {tenant}'s verification rounds used their share of the worker; the next in {wait:.1f} s",
                type="ResidueScanBusy", next_retry_delay=timedelta(seconds=wait))
        return None

    def _verify(self, session: Session, jobs: list[DeletionJob], request: FinishRequest, fetch: Fetch,
                clock: _Stopwatch) -> dict[uuid.UUID, Decision]:
        """One residue scan of the tenant's rows, files and histories for these jobs, then each job decided."""
        tenant, job_id = request.tenant_id, uuid.UUID(request.job_id)
        subjects = {job.job_id: job.subject_user_id for job in jobs}
        self._bind(session, tenant)
        # The scan reads a snapshot of its own, begun after every purge it verifies committed, in the CPU pool.
        found = clock.lap("rows_ms", offload.in_tenant, self.engine, tenant, scan, tenant, self.artifacts, subjects)
        texts, ids = matchers(session, tenant, list(subjects)), workflow_ids(session, tenant)
        clock.histories = len(ids)
        seen = clock.lap("histories_ms", history_copies, fetch, ids, texts,
                         {job.job_id: job.workflow_id for job in jobs}) if texts else {}
        decisions: dict[uuid.UUID, Decision] = {}
        for job in jobs:
            copies = [copy.label for copy in found.get(job.job_id, [])] + seen.get(job.job_id, [])
            if job.job_id == job_id:
                copies += request.history_copies  # a workflow from before rounds scanned its histories first
                decisions[job_id] = clock.lap("checks_ms", decide, session, job, copies[:MAX_COPIES],
                                              self.batch_size, len(jobs))
                continue
            try:
                with session.begin_nested():
                    decisions[job.job_id] = clock.lap("checks_ms", decide, session, job, copies[:MAX_COPIES],
                                                      self.batch_size, len(jobs))
            except Exception as exc:  # its own workflow's finish will meet it again, alone
                logger.warning("verification round: a job waits for the next round", extra={
                    "tenant_id": tenant, "reason": type(exc).__name__})  # the type: a message may quote content
        return decisions


class _Stopwatch:
    """A round's time, and where it went (milliseconds per part), for its log line."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.laps: dict[str, float] = dict.fromkeys(("rows_ms", "histories_ms", "checks_ms"), 0.0)
        self.histories = 0

    def lap(self, name: str, call: Callable[..., T], *args: Any) -> T:
        began = time.monotonic()
        try:
            return call(*args)
        finally:
            self.laps[name] = round(self.laps.get(name, 0.0) + (time.monotonic() - began) * 1000, 1)

    def total(self) -> float:
        return time.monotonic() - self.started



_ROUND_THREADS: ThreadPoolExecutor | None = None
ROUND_THREADS = 4
"""Rounds (and old runs' history scans) of different tenants at once in one worker process; more wait their turn."""


def round_threads() -> ThreadPoolExecutor:
    """The process's threads for rounds: a round blocks its thread for seconds (the pool's scan, the histories'
    fetches), and in the event loop's default executor six of them starved the fetches they waited for."""
    global _ROUND_THREADS
    if _ROUND_THREADS is None:
        _ROUND_THREADS = ThreadPoolExecutor(ROUND_THREADS, thread_name_prefix="mnemo-round")
    return _ROUND_THREADS
