"""Starting deletion workflows from the outbox: at once from the API, and by every worker's drain.

The database half and the reasons for the design are in :mod:`memory.deletion.outbox`; the one start, used
by the API right after the barrier and by the drain, is :func:`api.services.deletions.start_job`. Here: the
drain (:func:`drain`), and the loop ``mnemo worker`` runs (:func:`drain_forever`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import Engine
from temporalio.client import Client

from api.services.deletions import start_job
from api.settings import Settings
from memory.db import global_session, tenant_session
from memory.deletion import outbox
from memory.deletion.jobs import get_job
from memory.models import DeletionJob

log = logging.getLogger("mnemo.outbox")

DRAIN_BATCH = 100


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
