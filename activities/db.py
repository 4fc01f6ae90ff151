"""The one way activities open a database transaction."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from temporalio import activity

from memory.db import tenant_session

T = TypeVar("T")


@contextmanager
def shielded_session(engine: Engine, tenant_id: str) -> Iterator[Session]:
    """A tenant transaction that a cancellation cannot interrupt halfway.

    The SDK cancels a sync activity by raising inside its thread; landing in the
    middle of a database call, that corrupts the pooled connection (seen under
    load as "another command is already in progress"). Shielded, the exception
    arrives after the transaction has committed or rolled back.
    """
    shield = activity.shield_thread_cancel_exception() if activity.in_activity() else nullcontext()
    with shield, tenant_session(engine, tenant_id) as session:
        yield session


@contextmanager
def heartbeating(every_seconds: float = 5.0) -> Iterator[None]:
    """Heartbeat from a helper thread while the block runs (one statement that cannot heartbeat itself).

    Without it an activity that is one long transaction has only its start-to-close timeout: when
    its worker is killed, Temporal waits that long (10 minutes for a deletion's verification) before
    another attempt. ``bench/chaos.py`` found deletion jobs ``running`` 10 minutes after a worker
    kill for that reason. With a heartbeat timeout the attempt is retried once the heartbeats stop.
    """
    if not activity.in_activity():
        yield
        return
    stop = threading.Event()
    context = contextvars.copy_context()  # the activity's context, entered by the helper thread

    def beat() -> None:
        while not stop.wait(every_seconds):
            context.run(activity.heartbeat)

    helper = threading.Thread(target=beat, name="mnemo-heartbeat", daemon=True)
    helper.start()
    try:
        yield
    finally:
        stop.set()
        helper.join()


async def heartbeat_while(waited: Awaitable[T], every_seconds: float = 5.0) -> T:
    """``await waited``, heartbeating every ``every_seconds`` meanwhile: an async activity's wait on the CPU pool
    (whose idle-class processes may be slow to answer) must not look like a dead worker."""
    task = asyncio.ensure_future(waited)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every_seconds)
            if done:
                return task.result()
            if activity.in_activity():
                activity.heartbeat()
    except asyncio.CancelledError:  # the activity is cancelled: so is what it waits for (not yet begun, or awaitable)
        task.cancel()
        raise
