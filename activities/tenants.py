"""The one activity every per-tenant sweep starts with: which tenants there are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine
from temporalio import activity

from memory.db import global_session
from memory.identity.tenants import tenant_ids


class TenantActivities:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @activity.defn(name="retention_tenants")
    def tenants(self) -> list[str]:
        """Every tenant's id. Registered under the name the retention sweep gave it first: the histories of
        running sweeps name it so (an activity's name is part of a workflow's history)."""
        with global_session(self.engine) as session:
            return tenant_ids(session)

    @activity.defn(name="embedding_tenants")
    def embedding_tenants(self) -> list[str]:
        """The same list, under the name EmbeddingSweep runs started before ``workflows.sweeps.SHARED_TENANTS``
        scheduled it by: such a run replays, and may still be waiting for it. Goes with that patch."""
        return self.tenants()

    def all(self) -> list[Callable[..., Any]]:
        return [self.tenants, self.embedding_tenants]
