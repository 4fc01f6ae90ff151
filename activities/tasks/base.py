"""What every report task activity shares: the engine, the artifact store (its ``tasks`` namespace), the
destinations, a transaction.

Each activity is one or two tenant-scoped transactions guarded by ``state_version``; the rules they
apply live in ``memory.tasks``. Business failures are non-retryable ``ApplicationError``s whose
``type`` is the machine code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from temporalio.exceptions import ApplicationError

from activities.db import shielded_session
from activities.stores import PublicationDestination, StoredDestination, WebhookDestination, default_destinations
from activities.tasks.faults import FaultPlan, heartbeat
from activities.tasks.payloads import RunStepInput
from memory.artifact_store import ArtifactStore, read
from memory.egress import AllowList
from memory.errors import MnemoError
from memory.llm import LlmConfig
from memory.tasks.artifacts import task_store
from memory.tasks.contract import StepContext
from memory.tasks.destinations import destination as tenant_destination


def refusal(exc: MnemoError) -> ApplicationError:
    return ApplicationError(exc.message, exc.details, type=exc.code, non_retryable=True)


@contextmanager
def task_session(engine: Engine, tenant_id: str) -> Iterator[Session]:
    """:func:`activities.db.shielded_session`, with a domain refusal handed to the workflow as its code."""
    try:
        with shielded_session(engine, tenant_id) as session:
            yield session
    except MnemoError as exc:
        raise refusal(exc) from exc


class TaskActivitiesBase:
    def __init__(
        self,
        engine: Engine,
        artifacts: ArtifactStore,
        *,
        destinations: dict[str, PublicationDestination] | None = None,
        faults: FaultPlan | None = None,
        webhook_allowed: AllowList | None = None,
        llm: LlmConfig | None = None,
    ) -> None:
        self.engine = engine
        self.webhook_allowed = webhook_allowed or AllowList()  # MNEMO_WEBHOOK_ALLOWED_HOSTS
        self.artifacts = task_store(artifacts)
        self.artifact_root = artifacts
        self.destinations = destinations if destinations is not None else default_destinations(engine, artifacts)
        self.faults = faults or FaultPlan()
        self.llm = llm
        """The endpoint ``llm`` steps ask (MNEMO_LLM_*), None when there is none."""

    def _tx(self, tenant_id: str) -> AbstractContextManager[Session]:
        return task_session(self.engine, tenant_id)

    def _find_destination(self, tenant_id: str, name: str) -> PublicationDestination | None:
        """The worker's built-ins first, else the tenant's own (``publish_destinations``), read now: a webhook's
        new url or secret applies from the next send."""
        if name in self.destinations:
            return self.destinations[name]
        with self._tx(tenant_id) as session:
            row = tenant_destination(session, tenant_id, name)
        if row is None:
            return None
        if row.kind == "webhook" and row.url is not None and row.secret is not None:
            return WebhookDestination(name, row.url, row.secret, self.webhook_allowed)
        # The publications table is not tenant-keyed: the tenant in the name keeps tenants' archives apart.
        return StoredDestination(f"{tenant_id}/{name}", self.engine, self.artifact_root)

    def _destination(self, tenant_id: str, name: str) -> PublicationDestination:
        found = self._find_destination(tenant_id, name)
        if found is None:
            raise ApplicationError(
                f"unknown publication destination {name!r}", type="unknown_destination", non_retryable=True
            )
        return found

    def _context(self, req: RunStepInput, bundle: Mapping[str, Any] | None = None) -> StepContext:
        return StepContext(
            tenant_id=req.tenant_id,
            task_id=req.task_id,
            task_type=req.task_type,
            goal=req.goal,
            input_version=req.input_version,
            inputs=req.inputs,
            extra=req.extra,
            session=lambda: task_session(self.engine, req.tenant_id),
            read_artifact=lambda sha: read(self.artifacts, sha),
            heartbeat=heartbeat,
            artifacts=req.artifacts,
            bundle=bundle,
        )
