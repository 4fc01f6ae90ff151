"""A tenant's publish destinations: named places a task's approved artifact is published to, exactly once.

Two kinds: ``archive`` (mnemo's artifact store, served back by the API to whoever may read the task) and
``webhook`` (a signed POST to the tenant's receiver, which answers lookups by operation id so an outcome lost
in a timeout is reconciled, never blindly resent). A webhook's url is judged by the same address guard as the
tenant's reminder webhook (:func:`memory.egress.checked_target`) here and again at every delivery; its secret
is stored, never returned. Names a worker knows without a row (:data:`BUILT_IN`) cannot be redefined.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.egress import AllowList, Resolver, checked_target, system_resolver
from memory.enums import Role
from memory.errors import Conflict, Forbidden, InvalidInput, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry
from memory.tasks.models import PublishDestination, Task
from memory.tasks.reminders import MIN_SECRET_CHARS
from memory.tasks.states import TERMINAL

Kind = Literal["archive", "webhook"]
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
ARCHIVE = "archive"
BUILT_IN = re.compile(r"^(archive|reports(-.+)?)$")
"""Names workers serve without a row: ``archive``, today's ``reports`` and its fault drills (``reports-flaky``...)."""
ARCHIVE_NAMESPACE = "publications"
"""Where archive destinations keep published files in the artifact store; their locations start with it."""
LISTED_BUILT_INS = (ARCHIVE, "reports")
"""The built-ins every tenant has (the drills exist only on a worker that injects faults)."""


@dataclass(frozen=True)
class Destination:
    name: str
    kind: Kind
    url: str | None
    secret: str | None
    created_by: str
    updated_at: datetime


def _row(row: PublishDestination) -> Destination:
    kind: Kind = "webhook" if row.kind == "webhook" else "archive"
    return Destination(row.name, kind, row.url, row.secret, row.created_by, row.updated_at)


def check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidInput(
            "a destination name is 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
            code="invalid_destination_name", details={"name": name},
        )
    if BUILT_IN.match(name):
        raise Conflict(f"{name!r} is a built-in destination; choose another name", code="destination_reserved")


def put_destination(
    session: Session, principal: PrincipalContext, name: str, kind: Kind, url: str | None, secret: str | None,
    allowed: AllowList, resolve: Resolver = system_resolver,
) -> tuple[Destination, bool]:
    """An admin creates or replaces a destination; audited without the secret. The destination, and whether it
    is new (a PUT of the same body again changes nothing, not even ``updated_at``)."""
    if not principal.has(Role.ADMIN):
        raise Forbidden("setting a publish destination needs the admin role")
    check_name(name)
    if kind == "webhook":
        if url is None or secret is None:
            raise InvalidInput("a webhook destination needs a url and a secret", code="webhook_fields_missing")
        if len(secret) < MIN_SECRET_CHARS:
            raise InvalidInput(f"the secret needs at least {MIN_SECRET_CHARS} characters",
                               code="webhook_secret_too_short")
        checked_target(url, allowed, resolve)
    elif url is not None or secret is not None:
        raise InvalidInput("an archive destination takes no url or secret", code="archive_fields_unexpected")
    before = destination(session, principal.tenant_id, name)
    if before is not None and (before.kind, before.url, before.secret) == (kind, url, secret):
        return before, False
    values = {"kind": kind, "url": url, "secret": secret, "created_by": principal.user_id}
    session.execute(
        insert(PublishDestination).values(tenant_id=principal.tenant_id, name=name, **values)
        .on_conflict_do_update(index_elements=[PublishDestination.tenant_id, PublishDestination.name],
                               set_={**values, "updated_at": func.now()})
    )
    session.add(AuditEntry(tenant_id=principal.tenant_id, actor=principal.user_id, action="PUBLISH_DESTINATION_SET",
                           detail={"name": name, "kind": kind, "url": url, "key_id": principal.key_id}))
    session.flush()
    after = destination(session, principal.tenant_id, name)
    assert after is not None
    return after, before is None


def destination(session: Session, tenant_id: str, name: str) -> Destination | None:
    row = session.get(PublishDestination, (tenant_id, name))
    return None if row is None else _row(row)


def destinations(session: Session, tenant_id: str) -> list[Destination]:
    rows = session.execute(select(PublishDestination).where(PublishDestination.tenant_id == tenant_id)
                           .order_by(PublishDestination.name)).scalars()
    return [_row(row) for row in rows]


def remove_destination(session: Session, principal: PrincipalContext, name: str) -> None:
    """Refused while an open task of the tenant will publish there: deleting it would fail that task's publish
    after its approval, when the approver's work is already done."""
    if not principal.has(Role.ADMIN):
        raise Forbidden("removing a publish destination needs the admin role")
    if BUILT_IN.match(name):
        raise Conflict(f"{name!r} is a built-in destination and cannot be removed", code="destination_reserved")
    if destination(session, principal.tenant_id, name) is None:
        raise NotFound(f"publish destination {name!r} does not exist")
    waiting = session.execute(
        select(Task.task_id).where(Task.tenant_id == principal.tenant_id, Task.destination == name,
                                   Task.status.not_in([str(s) for s in TERMINAL])).order_by(Task.task_id).limit(5)
    ).scalars().all()
    if waiting:
        raise Conflict(f"open tasks will publish to {name!r}; cancel them or let them finish first",
                       code="destination_in_use", details={"task_ids": list(waiting)})
    session.execute(delete(PublishDestination).where(PublishDestination.tenant_id == principal.tenant_id,
                                                     PublishDestination.name == name))
    session.add(AuditEntry(tenant_id=principal.tenant_id, actor=principal.user_id,
                           action="PUBLISH_DESTINATION_REMOVED", detail={"name": name, "key_id": principal.key_id}))


def archived(location: str | None) -> bool:
    """Whether a publication's location is mnemo's own archive (served by the API), not a receiver's."""
    return location is not None and location.startswith(f"{ARCHIVE_NAMESPACE}/")
