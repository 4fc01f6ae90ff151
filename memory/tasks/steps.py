"""A step's attempts and its idempotent result, and when its failures fail the task.

Every try of a step is an attempt row; failed tries are kept. A step's SUCCEEDED row is its result:
an activity retried after it committed finds the row and returns the stored output.

The outage rule: an attempt that met an unreachable database or artifact store is recorded with the code
:data:`OUTAGE` or :data:`STORE_OUTAGE` and does not count; only the step's own failures use up
:data:`STEP_ATTEMPT_LIMIT` (the workflow's step retry policy has no attempt limit, so outages are waited out).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStoreUnavailable
from memory.db import is_connection_failure
from memory.llm import LlmUnavailable
from memory.tasks.contract import StepFailed
from memory.tasks.models import TaskAttempt, TaskStep


def _of_step(
    row: type[TaskStep] | type[TaskAttempt], tenant_id: str, task_id: str, step_id: str, input_version: str
) -> list[ColumnElement[bool]]:
    """The rows of one step at one input version: its step row, or its attempts."""
    return [
        row.tenant_id == tenant_id,
        row.task_id == task_id,
        row.step_id == step_id,
        row.input_version == input_version,
    ]


def succeeded_step(session: Session, tenant_id: str, idempotency_key: str) -> TaskStep | None:
    return session.execute(
        select(TaskStep).where(
            TaskStep.tenant_id == tenant_id, TaskStep.idempotency_key == idempotency_key, TaskStep.status == "SUCCEEDED"
        )
    ).scalar_one_or_none()


def start_attempt(
    session: Session,
    *,
    tenant_id: str,
    task_id: str,
    step_id: str,
    input_version: str,
    idempotency_key: str,
    temporal_attempt: int,
    input_digest: str,
    worker: str | None,
) -> TaskAttempt:
    """A new attempt row. Attempts of the same step still RUNNING belonged to a dead worker: ABANDONED."""
    session.execute(
        insert(TaskStep)
        .values(
            tenant_id=tenant_id,
            task_id=task_id,
            step_id=step_id,
            input_version=input_version,
            idempotency_key=idempotency_key,
            status="RUNNING",
            attempts=1,
        )
        .on_conflict_do_update(
            index_elements=["tenant_id", "task_id", "step_id", "input_version"],
            set_={"attempts": TaskStep.attempts + 1, "updated_at": func.now()},
        )
    )
    session.execute(
        update(TaskAttempt)
        .where(
            *_of_step(TaskAttempt, tenant_id, task_id, step_id, input_version),
            TaskAttempt.status == "RUNNING",
        )
        .values(
            status="ABANDONED",
            finished_at=func.now(),
            error={"code": "abandoned", "message": "superseded by a new attempt"},
        )
    )
    number = session.execute(
        select(func.coalesce(func.max(TaskAttempt.attempt_number), 0)).where(
            *_of_step(TaskAttempt, tenant_id, task_id, step_id, input_version),
        )
    ).scalar_one()
    attempt = TaskAttempt(
        tenant_id=tenant_id,
        attempt_id=uuid.uuid4(),
        task_id=task_id,
        step_id=step_id,
        input_version=input_version,
        attempt_number=int(number) + 1,
        temporal_attempt=temporal_attempt,
        status="RUNNING",
        input_digest=input_digest,
        worker=worker,
    )
    session.add(attempt)
    session.flush()
    return attempt


def finish_attempt(
    session: Session,
    tenant_id: str,
    attempt_id: uuid.UUID,
    *,
    status: str,
    output_digest: str | None = None,
    error: dict[str, Any] | None = None,
) -> None:
    session.execute(
        update(TaskAttempt)
        .where(TaskAttempt.tenant_id == tenant_id, TaskAttempt.attempt_id == attempt_id)
        .values(status=status, output_digest=output_digest, error=error, finished_at=func.now())
    )


def record_step_success(
    session: Session,
    tenant_id: str,
    task_id: str,
    step_id: str,
    input_version: str,
    output: dict[str, Any],
    digest: str,
) -> None:
    session.execute(
        update(TaskStep)
        .where(
            *_of_step(TaskStep, tenant_id, task_id, step_id, input_version),
        )
        .values(status="SUCCEEDED", output=output, output_digest=digest, updated_at=func.now())
    )


STEP_ATTEMPT_LIMIT = 5
"""A step that failed this many times on its own (not for an outage) fails its task."""

STEP_ATTEMPT_BACKSTOP = 50
"""Temporal attempts, outages included, after which an error outside the step's recorded attempts is final."""

OUTAGE = "database_unavailable"
"""The error code of an attempt that met an unreachable database: it does not count towards the limit."""
STORE_OUTAGE = ArtifactStoreUnavailable.code
"""... and of one that met an unreachable artifact store (an object store that is down): nor does it."""
LLM_OUTAGE = "llm_unavailable"
"""... and of one whose LLM endpoint could not answer now (a timeout, a 429, a 5xx): nor does it."""
OUTAGES = (OUTAGE, STORE_OUTAGE, LLM_OUTAGE)


def outage_code(exc: BaseException) -> str | None:
    """The code of an outage (the database, the artifact store or the LLM endpoint cannot answer now), or None: an
    outage says nothing about the step, so it is retried without limit and never fails its task."""
    if is_connection_failure(exc):
        return OUTAGE
    if isinstance(exc, LlmUnavailable) and exc.retryable:
        return LLM_OUTAGE
    return STORE_OUTAGE if isinstance(exc, ArtifactStoreUnavailable) else None


def record_step_failure(session: Session, tenant_id: str, task_id: str, step_id: str, input_version: str) -> int:
    """Mark the step FAILED; return how many of its attempts failed on their own (outages not counted)."""
    session.execute(
        update(TaskStep)
        .where(
            *_of_step(TaskStep, tenant_id, task_id, step_id, input_version),
            TaskStep.status != "SUCCEEDED",
        )
        .values(status="FAILED", updated_at=func.now())
    )
    return int(
        session.execute(
            select(func.count()).where(
                *_of_step(TaskAttempt, tenant_id, task_id, step_id, input_version),
                TaskAttempt.status == "FAILED",
                TaskAttempt.error["code"].astext.notin_(OUTAGES),
            )
        ).scalar_one()
    )


def failure_code(exc: BaseException, *, outage: str | None) -> str:
    """The code an attempt's failure is recorded with: a step's own business code, the outage's
    (:func:`outage_code`), or the exception's type (its text may hold SQL or content, so the type names it)."""
    if isinstance(exc, StepFailed):
        return exc.code
    return outage or type(exc).__name__


def fails_the_task(own_failures: int, *, outage: str | None) -> bool:
    """Whether this failure is the step's last: never for an outage, else at :data:`STEP_ATTEMPT_LIMIT`."""
    return outage is None and own_failures >= STEP_ATTEMPT_LIMIT
