"""The Temporal worker: registers every workflow and activity mnemo runs."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from sqlalchemy import Engine
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities.deletion import DeletionActivities, FaultPlan
from activities.embedding import EmbeddingActivities
from activities.knowledge import KnowledgeActivities
from activities.projection import ProjectionActivities
from activities.retention import RetentionActivities
from activities.sessions import SessionActivities
from activities.stores import PublicationDestination, default_destinations
from activities.tasks import TaskActivities
from activities.tasks.faults import FaultPlan as TaskFaultPlan
from activities.tasks.schedules import ScheduleActivities
from activities.tenants import TenantActivities
from api.observability.tracing import instrument_engine
from api.observability.worker_logging import OutcomeLogging, log_started, log_stopped
from api.observability.worker_metrics import free_loopback_port, serve_worker_metrics, temporal_runtime
from api.outbox import drain_forever
from api.settings import Settings
from api.temporal import (
    connect,
    ensure_embedding_schedule,
    ensure_knowledge_review_schedule,
    ensure_retention_schedule,
    ensure_session_sweep_schedule,
)
from memory import offload
from memory.artifact_store import ArtifactStore
from memory.db import make_engine
from memory.deletion.rounds import ScanBudget
from memory.egress import AllowList
from memory.embedders import TextEmbedder
from memory.llm import LlmConfig
from memory.sessions.extraction.base import Extractor
from memory.sessions.extraction.factory import make_extractor
from memory.sessions.extraction.rules import RulesExtractor
from memory.sessions.policy import CommitPolicy
from memory.tasks import registry
from workflows.deletion import DeletionWorkflow
from workflows.embedding import EmbedBacklogWorkflow, EmbeddingSweepWorkflow
from workflows.knowledge_review import KnowledgeReviewSweepWorkflow, KnowledgeReviewWorkflow
from workflows.projection import RebuildProjectionWorkflow
from workflows.report_task import ReportTaskWorkflow
from workflows.retention import RetentionSweepWorkflow
from workflows.scheduled_task import ScheduledTaskWorkflow
from workflows.session_commit import SessionCommitSweepWorkflow, SessionCommitWorkflow

logger = logging.getLogger(__name__)

WORKFLOWS: list[type] = [RebuildProjectionWorkflow, DeletionWorkflow, RetentionSweepWorkflow, ReportTaskWorkflow]
WORKFLOWS += [EmbedBacklogWorkflow, EmbeddingSweepWorkflow, SessionCommitWorkflow, SessionCommitSweepWorkflow]
WORKFLOWS += [ScheduledTaskWorkflow, KnowledgeReviewWorkflow, KnowledgeReviewSweepWorkflow]


def build_worker(
    client: Client,
    engine: Engine,
    task_queue: str,
    executor: ThreadPoolExecutor,
    *,
    deletion_batch_size: int = 500,
    faults: FaultPlan | None = None,
    artifacts: ArtifactStore | None = None,
    destinations: dict[str, PublicationDestination] | None = None,
    task_faults: TaskFaultPlan | None = None,
    publish_fault: str = "",
    activity_slots: int | None = None,
    extractor: Extractor | None = None,
    extractor_slots: int = 4,
    commit_policy: CommitPolicy | None = None,
    embedder: TextEmbedder | None = None,
    webhook_allowed: AllowList | None = None,
    scan_budget: ScanBudget | None = None,
    task_modules: tuple[str, ...] = (),
    llm: LlmConfig | None = None,
    review_wait: tuple[float, float] | None = None,
) -> Worker:
    """A worker for every mnemo workflow and activity on ``task_queue``.

    ``activity_slots`` bounds the activities the worker accepts at once; by default it is the
    executor's thread count. Most mnemo activities are synchronous, so one accepted beyond the
    executor's threads waits in the executor's queue, where it cannot heartbeat: with the SDK's
    default of 100 slots and a handful of threads, 200 concurrent report tasks had steps time out
    on their heartbeat before they ever started (issue 12). Bounded, the surplus stays in
    Temporal's task queue, where no timeout runs but schedule-to-start, and another worker may
    take it.

    ``extractor`` is what session commits extract with (default: the rules extractor), at most
    ``extractor_slots`` calls at once; ``commit_policy`` says when idle sessions commit by themselves.

    ``embedder`` fills the vector backlog and embeds knowledge as it is published (default: the
    ``MNEMO_EMBEDDINGS_*`` model, on first use).

    ``scan_budget`` is each tenant's share of deletion verification (default: :class:`ScanBudget`'s).

    ``task_modules``: the SDK modules whose task types and step functions this worker runs (besides mnemo's own).

    ``review_wait``: the deadline and reminder period (seconds) of the knowledge reviews the worker's sweep starts
    (default: the ``MNEMO_KNOWLEDGE_REVIEW_*`` settings).

    ``llm``: the endpoint task definitions' ``llm`` steps ask (MNEMO_LLM_*); without one such a step fails its task.

    ``task_faults`` and ``publish_fault`` inject faults for drills (settings: MNEMO_TASK_SLOW_STEPS,
    MNEMO_PUBLISH_FAULT; :func:`run_worker` passes them); by default there are none.
    """
    slots = activity_slots if activity_slots is not None else getattr(executor, "_max_workers", None)
    registry.load(task_modules)
    instrument_engine(engine)
    projection = ProjectionActivities(engine)
    artifacts = artifacts if artifacts is not None else Settings().artifact_root(engine)
    deletion = DeletionActivities(engine, batch_size=deletion_batch_size, faults=faults, artifacts=artifacts,
                                  scan_budget=scan_budget)
    retention = RetentionActivities(engine)
    if review_wait is None:
        configured = Settings()
        review_wait = (configured.knowledge_review_deadline_seconds, configured.knowledge_review_reminder_seconds)
    embedding = EmbeddingActivities(engine, embedder)
    sessions = SessionActivities(engine, extractor or RulesExtractor(), extractor_slots, commit_policy)
    tasks = TaskActivities(
        engine, artifacts, destinations=destinations or default_destinations(engine, artifacts, publish_fault),
        faults=task_faults, webhook_allowed=webhook_allowed, llm=llm,
    )
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=[
            projection.rebuild_projection_batch,
            deletion.begin,
            deletion.set_status,
            deletion.purge,
            deletion.finish,
            deletion.scan_histories,
            retention.open_jobs,
            *TenantActivities(engine, lambda: embedding.embedder.name, sessions.policy).all(),
            *tasks.all(),
            *ScheduleActivities(engine).all(),
            *embedding.all(),
            *KnowledgeActivities(engine, lambda: embedding.embedder, webhook_allowed, review_wait).all(),
            *sessions.all(),
        ],
        activity_executor=executor,
        max_concurrent_activities=slots,
        interceptors=[OutcomeLogging()],
    )


STARTUP_PATIENCE_SECONDS = 120.0
"""How long a starting worker waits for Temporal: a supervised restart of the dev server takes about a second,
and a worker started in that second used to exit with "connection refused", counted as a crash."""


async def _start_up(
    settings: Settings, stop: asyncio.Event, patience: float = STARTUP_PATIENCE_SECONDS, runtime: Runtime | None = None
) -> Client:
    """Connect and ensure the schedules, retrying while Temporal cannot be reached (until ``patience`` runs out)."""
    loop = asyncio.get_running_loop()
    deadline, delay = loop.time() + patience, 0.25
    while True:
        try:
            client = await connect(settings, runtime)
            await ensure_retention_schedule(
                client, settings.task_queue, timedelta(hours=settings.retention_sweep_hours)
            )
            await ensure_embedding_schedule(client, settings.task_queue)
            await ensure_session_sweep_schedule(client, settings.task_queue)
            await ensure_knowledge_review_schedule(client, settings.task_queue)
            return client
        except (RuntimeError, RPCError) as exc:
            if stop.is_set() or loop.time() + delay > deadline:
                raise
            logger.warning("Temporal at %s is not reachable yet (%s); retrying in %.1fs",
                           settings.temporal_address, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def run_worker(settings: Settings, stop: asyncio.Event) -> None:
    """Poll until ``stop`` is set, then shut down through the SDK (in-flight tasks finish) and return."""
    # One connection per activity thread, plus the outbox drain's.
    engine = make_engine(
        settings.require_database_url(), pool_size=max(settings.db_pool_size, settings.worker_activity_slots + 1)
    )
    runtime, metrics = None, None
    if settings.worker_metrics_port is not None:
        sdk_port = free_loopback_port()
        runtime = temporal_runtime(sdk_port)
        metrics = serve_worker_metrics(settings.worker_metrics_host, settings.worker_metrics_port, sdk_port)
    try:
        client = await _start_up(settings, stop, runtime=runtime)
    except BaseException:
        engine.dispose()
        if metrics is not None:
            metrics.shutdown()
        raise
    await asyncio.to_thread(offload.start, settings.cpu_pool_workers, settings.cpu_pool_niceness,
                            settings.cpu_pool_idle)
    try:
        with ThreadPoolExecutor(max_workers=settings.worker_activity_slots) as executor:
            async with build_worker(
                client,
                engine,
                settings.task_queue,
                executor,
                deletion_batch_size=settings.deletion_batch_size,
                artifacts=settings.artifact_root(engine),
                faults=FaultPlan.from_spec(settings.deletion_faults),
                scan_budget=ScanBudget(settings.residue_scan_share, settings.residue_scan_burst_seconds),
                task_faults=TaskFaultPlan.from_spec(settings.task_slow_steps),
                publish_fault=settings.publish_fault,
                activity_slots=settings.worker_activity_slots,
                extractor=make_extractor(settings.extractor, settings.llm_config()),
                extractor_slots=settings.llm_max_concurrency,
                commit_policy=settings.commit_policy(),
                webhook_allowed=settings.webhook_allow_list(),
                task_modules=settings.task_module_names(),
                llm=settings.llm_config(),
                review_wait=(settings.knowledge_review_deadline_seconds, settings.knowledge_review_reminder_seconds),
            ):
                log_started(settings.task_queue, settings.temporal_namespace, extractor=settings.extractor,
                            activity_slots=settings.worker_activity_slots)
                # Deletions accepted while Temporal was down start now, and whenever one is queued later.
                await drain_forever(client, engine, settings, stop)
        log_stopped(settings.task_queue)
    finally:
        offload.stop()
        engine.dispose()
        if metrics is not None:
            metrics.shutdown()
            metrics.server_close()
