"""A tenant's registered task definitions (table ``task_definitions``, migration 0027): versions are immutable.

Registering is idempotent by body: the same body for a version again changes nothing, another body for it is a
409 naming the registered hash, so a version means one thing for every task that ever ran on it. Another tenant's
type is the same 404 as a missing one (row-level security hides its rows).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import Conflict, NotFound
from memory.models import AuditEntry
from memory.tasks.definitions import Definition, from_body
from memory.tasks.models import TaskDefinitionRow


@dataclass(frozen=True)
class StoredDefinition:
    definition: Definition
    created_at: datetime
    created_by: str
    """The user id of the admin who registered it."""


def _stored(row: TaskDefinitionRow) -> StoredDefinition:
    # A stored body passed from_body when it was registered: parsing it again gives the same definition.
    return StoredDefinition(from_body(row.task_type, row.body), row.created_at, row.created_by)


def put_definition(session: Session, tenant_id: str, definition: Definition, user_id: str) -> bool:
    """Register a version: True when it is new, False when this very body is registered already (audited once,
    as ``TASK_DEFINITION_REGISTERED``); another body for the version is a 409 ``definition_version_conflict``."""
    inserted = session.execute(
        insert(TaskDefinitionRow)
        .values(tenant_id=tenant_id, task_type=definition.task_type, version=definition.version,
                body=dict(definition.body), body_sha256=definition.sha256, created_by=user_id)
        .on_conflict_do_nothing()
        .returning(TaskDefinitionRow.version)
    ).scalar_one_or_none()
    if inserted is not None:
        session.add(AuditEntry(tenant_id=tenant_id, actor=user_id, action="TASK_DEFINITION_REGISTERED",
                               detail={"task_type": definition.task_type, "version": definition.version,
                                       "sha256": definition.sha256}))
        return True
    registered = session.execute(
        select(TaskDefinitionRow.body_sha256).where(
            TaskDefinitionRow.tenant_id == tenant_id, TaskDefinitionRow.task_type == definition.task_type,
            TaskDefinitionRow.version == definition.version)
    ).scalar_one()
    if registered == definition.sha256:
        return False
    raise Conflict(
        f"version {definition.version!r} of {definition.task_type!r} is registered with another body "
        f"(sha256 {registered}); versions never change: register the new body under a new version",
        code="definition_version_conflict",
        details={"task_type": definition.task_type, "version": definition.version, "registered_sha256": registered},
    )


def versions(session: Session, tenant_id: str, task_type: str) -> list[StoredDefinition]:
    """Every version of a type, oldest first; a type the tenant never registered is a 404."""
    rows = session.execute(
        select(TaskDefinitionRow)
        .where(TaskDefinitionRow.tenant_id == tenant_id, TaskDefinitionRow.task_type == task_type)
        .order_by(TaskDefinitionRow.seq)
    ).scalars().all()
    if not rows:
        raise NotFound(f"no task type {task_type!r} is defined: GET /task-definitions lists the ones there are",
                       code="task_type_not_found")
    return [_stored(row) for row in rows]


def latest(session: Session, tenant_id: str, task_type: str) -> Definition | None:
    """The version registered last (what a new task starts on), or None when the type is not registered."""
    row = session.execute(
        select(TaskDefinitionRow)
        .where(TaskDefinitionRow.tenant_id == tenant_id, TaskDefinitionRow.task_type == task_type)
        .order_by(TaskDefinitionRow.seq.desc())
        .limit(1)
    ).scalar_one_or_none()
    return None if row is None else _stored(row).definition


def listing(session: Session, tenant_id: str) -> dict[str, list[StoredDefinition]]:
    """Every registered type of the tenant by name (sorted), each with its versions oldest first."""
    rows = session.execute(
        select(TaskDefinitionRow)
        .where(TaskDefinitionRow.tenant_id == tenant_id)
        .order_by(TaskDefinitionRow.task_type, TaskDefinitionRow.seq)
    ).scalars().all()
    types: dict[str, list[StoredDefinition]] = defaultdict(list)
    for row in rows:
        types[row.task_type].append(_stored(row))
    return dict(types)


def registered_version(session: Session, tenant_id: str, task_type: str, version: str) -> Definition | None:
    """One registered version (what a task that pinned it runs), or None."""
    row = session.execute(
        select(TaskDefinitionRow).where(TaskDefinitionRow.tenant_id == tenant_id,
                                        TaskDefinitionRow.task_type == task_type, TaskDefinitionRow.version == version)
    ).scalar_one_or_none()
    return None if row is None else _stored(row).definition
