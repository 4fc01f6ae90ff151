"""Reminders delivered to the tenant's webhook: its configuration, the signed message, the key. An approval's
reminder is built here; a knowledge review's (:mod:`memory.knowledge.review`) is signed the same way.

An admin sets one webhook per tenant (``url`` and ``secret``; audited as ``TENANT_WEBHOOK_CHANGED``
without the secret). A reminder is a JSON body naming the task, the approval, the reminder's number,
the deadline and the draft's sha256 — never the draft's text — signed with HMAC-SHA256 over
``"{timestamp}.{body}"``: the receiver recomputes it with the shared secret and refuses a stale
timestamp, so a captured request cannot be replayed later. The idempotency key is derived from the
approval and the number alone, so every retry of one reminder carries the same key and a receiver
can drop a repeat.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.egress import AllowList, Resolver, checked_target, system_resolver
from memory.enums import Role
from memory.errors import Forbidden, InvalidInput, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry
from memory.tasks.approvals import get_approval
from memory.tasks.models import TenantWebhook

SIGNATURE_HEADER = "X-Mnemo-Signature"
TIMESTAMP_HEADER = "X-Mnemo-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"
EVENT_HEADER = "X-Mnemo-Event"
MIN_SECRET_CHARS = 16


@dataclass(frozen=True)
class Webhook:
    url: str
    secret: str
    updated_at: datetime
    updated_by: str


def set_webhook(
    session: Session, principal: PrincipalContext, url: str, secret: str, allowed: AllowList,
    resolve: Resolver = system_resolver,
) -> Webhook:
    """An admin sets (or replaces) the tenant's webhook; audited with the url, never the secret.

    The url must reach a public address, or one the operator's ``allowed`` names (:mod:`memory.egress`);
    it is judged again before every delivery."""
    if not principal.has(Role.ADMIN):
        raise Forbidden("setting the tenant's webhook needs the admin role")
    if len(secret) < MIN_SECRET_CHARS:
        raise InvalidInput(f"the secret needs at least {MIN_SECRET_CHARS} characters", code="webhook_secret_too_short")
    checked_target(url, allowed, resolve)
    values = {"url": url, "secret": secret, "updated_by": principal.user_id}
    session.execute(
        insert(TenantWebhook)
        .values(tenant_id=principal.tenant_id, **values)
        .on_conflict_do_update(index_elements=[TenantWebhook.tenant_id], set_={**values, "updated_at": func.now()})
    )
    session.add(AuditEntry(tenant_id=principal.tenant_id, actor=principal.user_id, action="TENANT_WEBHOOK_CHANGED",
                           detail={"url": url, "key_id": principal.key_id}))
    session.flush()
    found = webhook(session, principal.tenant_id)
    assert found is not None
    return found


def remove_webhook(session: Session, principal: PrincipalContext) -> None:
    if not principal.has(Role.ADMIN):
        raise Forbidden("removing the tenant's webhook needs the admin role")
    removed = session.execute(
        delete(TenantWebhook).where(TenantWebhook.tenant_id == principal.tenant_id).returning(TenantWebhook.url)
    ).scalar_one_or_none()
    if removed is None:
        raise NotFound("this tenant has no webhook")
    session.add(AuditEntry(tenant_id=principal.tenant_id, actor=principal.user_id, action="TENANT_WEBHOOK_REMOVED",
                           detail={"url": removed, "key_id": principal.key_id}))


def webhook(session: Session, tenant_id: str) -> Webhook | None:
    row = session.execute(select(TenantWebhook).where(TenantWebhook.tenant_id == tenant_id)).scalar_one_or_none()
    return None if row is None else Webhook(row.url, row.secret, row.updated_at, row.updated_by)


@dataclass(frozen=True)
class Reminder:
    """One reminder, ready to send: the same body and key for every attempt."""

    url: str
    secret: str
    idempotency_key: str
    body: bytes
    event: str = "approval_reminder"
    """``X-Mnemo-Event``: what the body is about (an approval's reminder, a knowledge review's, ...)."""


def signed_message(session: Session, tenant_id: str, event: str, key: str, body: dict[str, Any]) -> Reminder | None:
    """``body`` (ids, hashes, instants: never content) ready for the tenant's webhook; None when it has none."""
    hook = webhook(session, tenant_id)
    if hook is None:
        return None
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return Reminder(hook.url, hook.secret, key, encoded, event)


def idempotency_key(approval_id: uuid.UUID, number: int) -> str:
    return f"approval-reminder:{approval_id}:{number}"


def pending_reminder(session: Session, tenant_id: str, approval_id: uuid.UUID, number: int) -> Reminder | None:
    """Reminder ``number`` of a still PENDING approval, for the tenant's webhook; None when either is missing."""
    approval = get_approval(session, tenant_id, approval_id)
    if approval.status != "PENDING":
        return None
    body = {
        "type": "approval_reminder",
        "tenant_id": tenant_id,
        "task_id": approval.task_id,
        "approval_id": str(approval.approval_id),
        "approval_type": approval.approval_type,
        "reminder_number": number,
        "requested_at": approval.requested_at.isoformat(),
        "deadline_at": approval.deadline_at.isoformat(),
        "artifact_sha256": approval.artifact_sha256,
    }
    return signed_message(session, tenant_id, "approval_reminder", idempotency_key(approval.approval_id, number), body)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=`` and the hex HMAC-SHA256 of ``"{timestamp}.{body}"`` under ``secret``."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signed_headers(reminder: Reminder, timestamp: int) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        EVENT_HEADER: reminder.event,
        IDEMPOTENCY_HEADER: reminder.idempotency_key,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(reminder.secret, timestamp, reminder.body),
    }
