"""Hotness input: each injected memory's use count and last use (``memory_usage``, purged with the projection).

In the store, below both of its writers: recall counts what its bundles inject, and a session commit counts what
its bundles and profile injection used, without either importing the other.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache

from sqlalchemy import DateTime, Text, any_, bindparam, literal, select
from sqlalchemy.dialects.postgresql import ARRAY, UUID, Insert, insert
from sqlalchemy.orm import Session

from memory.models import MemorySearch, MemoryUsage


def mark_used_ids(session: Session, tenant_id: str, memory_ids: Sequence[uuid.UUID], now: datetime) -> None:
    """Count each of ``memory_ids`` as used at ``now``: the memories a bundle injected, or those a session
    commit's bundles and profile injection used.

    Only for memories whose projection row still exists, in memory-id order (one lock order for
    concurrent bundles). The projection rows are read ``FOR KEY SHARE``: a purge deleting one of them
    concurrently either waits for this transaction (and its cascade then removes the new counter) or
    commits first, and the locked read skips the row. Either way no counter outlives its memory, and
    the foreign key never fails mid-bundle.
    """
    ids = list(set(memory_ids))  # the statement orders them
    if not ids:
        return
    # On the session's connection: ORM execution would take the parameters for rows to insert.
    session.connection().execute(_mark_used_statement(), {"tenant": tenant_id, "ids": ids, "now": now})


@lru_cache(maxsize=1)
def _mark_used_statement() -> Insert:
    """Built once (building it cost ~1 ms a bundle); the tenant, the ids and the instant are parameters."""
    present = (
        select(MemorySearch.tenant_id, MemorySearch.memory_id, literal(1),
               bindparam("now", type_=DateTime(timezone=True)))
        .where(MemorySearch.tenant_id == bindparam("tenant", type_=Text),
               MemorySearch.memory_id == any_(bindparam("ids", type_=ARRAY(UUID(as_uuid=True)))))
        .order_by(MemorySearch.memory_id)
        .with_for_update(read=True, key_share=True)
    )
    statement = insert(MemoryUsage).from_select(["tenant_id", "memory_id", "active_count", "last_used_at"], present)
    return statement.on_conflict_do_update(
        index_elements=["tenant_id", "memory_id"],
        set_={"active_count": MemoryUsage.active_count + 1, "last_used_at": statement.excluded.last_used_at},
    )
