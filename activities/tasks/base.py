"""What every report task activity shares: the engine, the artifact store (its ``tasks`` namespace), the
destinations, a transaction.

Each activity is one or two tenant-scoped transactions guarded by ``state_version``; the rules they
apply live in ``memory.tasks``. Business failures are non-retryable ``ApplicationError``s whose
``type`` is the machine code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from temporalio.exceptions import ApplicationError

from activities.db import shielded_session
from activities.stores import PublicationDestination, default_destinations
from activities.tasks.faults import FaultPlan, heartbeat
from activities.tasks.payloads import RunStepInput
from memory.artifact_store import ArtifactStore, read
from memory.egress import AllowList
from memory.errors import MnemoError
from memory.tasks.artifacts import task_store
from memory.tasks.contract import StepContext


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
    ) -> None:
        self.engine = engine
        self.webhook_allowed = webhook_allowed or AllowList()  # MNEMO_WEBHOOK_ALLOWED_HOSTS
        self.artifacts = task_store(artifacts)
        self.destinations = destinations if destinations is not None else default_destinations(engine, artifacts)
        self.faults = faults or FaultPlan()

    def _tx(self, tenant_id: str) -> AbstractContextManager[Session]:
        return task_session(self.engine, tenant_id)

    def _destination(self, name: str) -> PublicationDestination:
        try:
            return self.destinations[name]
        except KeyError:
            raise ApplicationError(
                f"unknown publication destination {name!r}", type="unknown_destination", non_retryable=True
            ) from None

    def _context(self, req: RunStepInput) -> StepContext:
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
        )
