"""The one way activities open a database transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from temporalio import activity

from memory.db import tenant_session


@contextmanager
def shielded_session(engine: Engine, tenant_id: str) -> Iterator[Session]:
    """A tenant transaction that a cancellation cannot interrupt halfway.

    The SDK cancels a sync activity by raising inside its thread; landing in the
    middle of a database call, that corrupts the pooled connection (seen under
    load as "another command is already in progress"). Shielded, the exception
    arrives after the transaction has committed or rolled back.
    """
    shield = activity.shield_thread_cancel_exception() if activity.in_activity() else nullcontext()
    with shield:
        with tenant_session(engine, tenant_id) as session:
            yield session
