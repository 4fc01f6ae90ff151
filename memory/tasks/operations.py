"""Side effects (publications): recorded before they are sent, reconciled when their outcome is unknown.

An operation's id and idempotency key are written before the side effect, so an outcome lost in a
timeout can be asked for by operation id instead of being sent again. The re-check of the approval
before a send is :func:`memory.tasks.approvals.recheck_before_publish`; that a cancel stops the next
send is :mod:`memory.tasks.controls`.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import Conflict, Forbidden, InvalidInput, NotFound
from memory.identity.auth import may_operate
from memory.tasks.live import ResolveRequest, TaskState
from memory.tasks.models import TaskOperation
from memory.tasks.states import TaskStatus

SETTLED = ("SUCCEEDED", "UNKNOWN_OUTCOME", "FAILED")
"""Statuses a retried publish answers from the row instead of sending."""


def get_operation(session: Session, tenant_id: str, operation_id: uuid.UUID, *, lock: bool = False) -> TaskOperation:
    query = select(TaskOperation).where(
        TaskOperation.tenant_id == tenant_id, TaskOperation.operation_id == operation_id
    )
    row = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if row is None:
        raise NotFound(f"operation {operation_id} does not exist")
    return row


def begin_operation(
    session: Session,
    *,
    tenant_id: str,
    task_id: str,
    operation_id: uuid.UUID,
    kind: str,
    idempotency_key: str,
    destination: str,
    artifact_sha256: str,
) -> TaskOperation:
    """Record the operation id and key *before* the side effect, so an unknown outcome can be reconciled."""
    session.execute(
        insert(TaskOperation)
        .values(
            tenant_id=tenant_id,
            operation_id=operation_id,
            task_id=task_id,
            kind=kind,
            idempotency_key=idempotency_key,
            destination=destination,
            artifact_sha256=artifact_sha256,
            status="PENDING",
        )
        .on_conflict_do_nothing()
    )
    return get_operation(session, tenant_id, operation_id)


def update_operation(session: Session, tenant_id: str, operation_id: uuid.UUID, **values: Any) -> TaskOperation:
    session.execute(
        update(TaskOperation)
        .where(TaskOperation.tenant_id == tenant_id, TaskOperation.operation_id == operation_id)
        .values(**values, updated_at=func.now())
    )
    return get_operation(session, tenant_id, operation_id)


def operations(session: Session, tenant_id: str, task_id: str) -> list[TaskOperation]:
    return list(
        session.execute(
            select(TaskOperation)
            .where(TaskOperation.tenant_id == tenant_id, TaskOperation.task_id == task_id)
            .order_by(TaskOperation.created_at, TaskOperation.operation_id)
        ).scalars()
    )


def check_resolve(live: TaskState | None, request: ResolveRequest) -> None:
    """An operator's verdict on an operation nobody could reconcile (the workflow's validator)."""
    if not may_operate(request.roles):
        raise Forbidden("resolving an operation needs the operator role")
    if request.outcome not in ("published", "not_published"):
        raise InvalidInput("outcome must be 'published' or 'not_published'", code="invalid_outcome")
    if live is None or live.status != TaskStatus.WAITING_FOR_OPERATOR.value:
        status = live.status if live is not None else TaskStatus.CREATED.value
        raise Conflict(f"the task is {status}, not waiting for an operator", code="not_waiting_for_operator")
    unresolved = [op.operation_id for op in live.operations if op.status == "UNKNOWN_OUTCOME"]
    if request.operation_id not in unresolved:
        raise Conflict(f"operation {request.operation_id} is not awaiting resolution", code="unknown_operation")
