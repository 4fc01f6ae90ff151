"""Starting deletion workflows from the outbox: at once from the API, and by every worker's drain.

The database half and the reasons for the design are in :mod:`memory.deletion.outbox`. Here:
one start (:func:`start_job`, used by the API right after the barrier and by the drain), the
drain (:func:`drain`), and the loop ``mnemo worker`` runs (:func:`drain_forever`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from sqlalchemy import Engine
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from api.settings import Settings
from memory.db import global_session, tenant_session
from memory.deletion import outbox
from memory.deletion.jobs import JobStatus, get_job
from memory.models import DeletionJob
from workflows.deletion import DeletionInput, DeletionWorkflow
from workflows.fairness import tenant_priority

log = logging.getLogger("mnemo.outbox")

START_TIMEOUT_SECONDS = 5.0
"""A start that Temporal does not answer in this time counts as failed; the row stays for the drain."""

DRAIN_BATCH = 100


async def start_job(
    connect: Callable[[], Awaitable[Client]], engine: Engine, settings: Settings, job: DeletionJob
) -> str | None:
    """Start the job's workflow under its deterministic id and clear its outbox row; the error, if it failed.

    A job already completed only has its row cleared. "Already started" (the run closed, the id is
    not reused) counts as started: that run is the one the job had.
    """
    tenant_id, job_id, workflow_id = job.tenant_id, job.job_id, job.workflow_id
    if job.status != JobStatus.COMPLETED.value:
        try:
            client = await asyncio.wait_for(connect(), START_TIMEOUT_SECONDS)
            await asyncio.wait_for(
                client.start_workflow(
                    DeletionWorkflow.run,
                    DeletionInput(
                        tenant_id=tenant_id,
                        job_id=str(job_id),
                        retry_wait_seconds=settings.deletion_retry_wait_seconds,
                        heartbeat_timeout_seconds=settings.deletion_heartbeat_timeout_seconds,
                    ),
                    id=workflow_id,
                    task_queue=settings.task_queue,
                    priority=tenant_priority(tenant_id),
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                ),
                START_TIMEOUT_SECONDS,
            )
        except WorkflowAlreadyStartedError:
            pass
        except Exception as exc:  # unreachable, refused or slow: the row stays queued
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

            def failed() -> None:
                with tenant_session(engine, tenant_id) as session:
                    outbox.attempt_failed(session, tenant_id, job_id, error)

            await asyncio.to_thread(failed)
            return error

    def done() -> None:
        with tenant_session(engine, tenant_id) as session:
            outbox.started(session, tenant_id, job_id)

    await asyncio.to_thread(done)
    return None


async def drain(client: Client, engine: Engine, settings: Settings, limit: int = DRAIN_BATCH) -> int:
    """Start up to ``limit`` queued jobs; returns how many were started (or found already started)."""

    def load() -> list[outbox.Pending]:
        with global_session(engine) as session:
            return outbox.pending(session, limit)

    async def connected() -> Client:
        return client

    def job_of(item: outbox.Pending) -> DeletionJob:
        with tenant_session(engine, item.tenant_id) as session:
            return get_job(session, item.tenant_id, item.job_id)

    started = 0
    for item in await asyncio.to_thread(load):
        error = await start_job(connected, engine, settings, await asyncio.to_thread(job_of, item))
        if error is None:
            started += 1
        else:
            log.warning("deletion job %s/%s is still queued: %s", item.tenant_id, item.job_id, error)
    return started


async def drain_forever(client: Client, engine: Engine, settings: Settings, stop: asyncio.Event) -> None:
    """Drain now, then every ``outbox_drain_seconds`` until ``stop``; a failed round is logged and retried."""
    while not stop.is_set():
        try:
            started = await drain(client, engine, settings)
            if started:
                log.info("started %d queued deletion workflow(s)", started)
        except Exception:  # the database may be down for a while: try again next round
            log.exception("draining the deletion outbox failed; retrying")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), settings.outbox_drain_seconds)
