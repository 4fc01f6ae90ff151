"""The lifecycle of API keys after creation: list, revoke, rotate, and revoke a user's keys.

Keys are created by :func:`memory.identity.auth.create_api_key`. Every change here is written to the
tenant's audit log (:func:`memory.identity.auth.audit_key`: ``KEY_REVOKED``, ``KEY_ROTATED``) in the same
transaction as the change. Nothing is deleted: a revoked key stays listed, so the log's key ids
keep pointing at something.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.db import enter_tenant
from memory.errors import Conflict, InvalidInput, NotFound
from memory.identity.auth import audit_key, check_lifetime, create_api_key, key_is_active, now
from memory.models import ApiKey

MAX_GRACE = timedelta(days=30)
_KEY_ID = re.compile(r"^(?:mnemo_)?([a-z0-9]{12})(?:_[A-Za-z0-9_-]{43})?$")
_DURATION = re.compile(r"(\d+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


@dataclass(frozen=True)
class KeyInfo:
    """A key as an admin sees it: never its secret or the secret's hash."""

    key_id: str
    tenant_id: str
    user_id: str
    agent_id: str | None
    roles: list[str]
    state: str
    """``active``, ``expired``, ``revoked`` or ``grace`` (revoked at a set instant still to come)."""
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    rotated_from: str | None


def _state(key: ApiKey, at: datetime) -> str:
    if key.revoked_at is not None and key.revoked_at <= at:
        return "revoked"
    if key.expires_at is not None and key.expires_at <= at:
        return "expired"
    return "grace" if key.revoked_at is not None else "active"


def _info(key: ApiKey, at: datetime) -> KeyInfo:
    return KeyInfo(
        key_id=key.key_id, tenant_id=key.tenant_id, user_id=key.user_id, agent_id=key.agent_id,
        roles=list(key.roles), state=_state(key, at), created_at=key.created_at, expires_at=key.expires_at,
        revoked_at=key.revoked_at, rotated_from=key.rotated_from,
    )


def parse_duration(raw: str, what: str) -> timedelta:
    """``90d``, ``12h``, ``1h30m``, ``2w``: a typed 422-style error for anything else."""
    text = raw.strip().lower()
    if not text or _DURATION.sub("", text) != "":
        raise InvalidInput(
            f"{what} {raw!r} is not a duration; write e.g. 90d, 12h, 30m or 1h30m", code="invalid_duration"
        )
    return timedelta(seconds=sum(int(amount) * _UNITS[unit] for amount, unit in _DURATION.findall(text)))


def key_id_of(raw: str) -> str:
    """The key id of a key id or of a whole key (``mnemo_<id>_<secret>``): a leaked key can be pasted as is."""
    match = _KEY_ID.match(raw.strip())
    if match is None:
        raise InvalidInput(
            "expected a key id (12 lowercase letters or digits) or a whole mnemo_ key", code="invalid_key_id"
        )
    return match.group(1)


def _locked(session: Session, key_id: str) -> ApiKey:
    key = session.execute(select(ApiKey).where(ApiKey.key_id == key_id).with_for_update()).scalar_one_or_none()
    if key is None:
        raise NotFound(f"API key {key_id} does not exist", code="key_not_found")
    return key


def list_keys(
    session: Session, *, tenant_id: str | None = None, user_id: str | None = None, include_inactive: bool = False
) -> list[KeyInfo]:
    """Keys by tenant, user and creation; only usable ones (active or in grace) unless ``include_inactive``."""
    at = now()
    statement = select(ApiKey).order_by(ApiKey.tenant_id, ApiKey.user_id, ApiKey.created_at, ApiKey.key_id)
    if tenant_id is not None:
        statement = statement.where(ApiKey.tenant_id == tenant_id)
    if user_id is not None:
        statement = statement.where(ApiKey.user_id == user_id)
    if not include_inactive:
        statement = statement.where(key_is_active(at))
    return [_info(key, at) for key in session.execute(statement).scalars()]


def revoke_key(session: Session, key_id: str, *, actor: str, reason: str | None = None) -> KeyInfo:
    """Refuse the key from now on. Revoking a revoked key changes nothing (and audits nothing)."""
    key = _locked(session, key_id)
    at = now()
    if _state(key, at) == "revoked":
        return _info(key, at)
    key.revoked_at = at
    audit_key(session, key, "KEY_REVOKED", actor, reason=reason)
    session.flush()
    return _info(key, at)


def revoke_keys(
    session: Session, tenant_id: str, user_id: str, *, actor: str, reason: str | None = None, keep: str | None = None
) -> list[str]:
    """Revoke every key of one user of one tenant that is not revoked yet (in grace included); their ids.

    For a subject deletion: once it is accepted, the subject's keys must no longer write (``keep``:
    the key of a person deleting themselves, so they can follow their job to its proof). Each key
    gets its own ``KEY_REVOKED`` audit row; run it in the transaction of the change that causes it.
    """
    at = now()
    keys = session.execute(
        select(ApiKey)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.user_id == user_id)
        .order_by(ApiKey.key_id)
        .with_for_update()
    ).scalars().all()
    revoked = []
    for key in keys:
        if _state(key, at) == "revoked" or key.key_id == keep:
            continue
        key.revoked_at = at
        audit_key(session, key, "KEY_REVOKED", actor, reason=reason)
        revoked.append(key.key_id)
    session.flush()
    return revoked


def rotate_key(
    session: Session,
    key_id: str,
    *,
    actor: str,
    grace: timedelta = timedelta(0),
    expires_in: timedelta | None = None,
) -> tuple[str, KeyInfo]:
    """A new key with the old one's tenant, user, agent and roles; the old one is revoked after ``grace``.

    The new key's lifetime is ``expires_in``, or else the old key's lifetime (a 90-day key rotates into
    another 90-day key; one that never expired into one that never expires). An expired key can be
    rotated (that is how its holder gets back in); a revoked one, or one already rotated and in its
    grace period, cannot (``key_revoked``).
    """
    if not timedelta(0) <= grace <= MAX_GRACE:
        raise InvalidInput("the grace period must be between 0 and 30 days", code="invalid_grace")
    old = _locked(session, key_id)
    at = now()
    state = _state(old, at)
    if state in ("revoked", "grace"):
        raise Conflict(f"API key {key_id} is {'revoked' if state == 'revoked' else 'already being rotated'}",
                       code="key_revoked")
    enter_tenant(session, old.tenant_id)  # principals and the audit log are tenant rows
    if expires_in is not None:
        check_lifetime(expires_in)
    elif old.expires_at is not None:
        expires_in = max(old.expires_at - old.created_at, timedelta(minutes=1))
    secret = create_api_key(
        session, tenant_id=old.tenant_id, user_id=old.user_id, roles=list(old.roles), agent_id=old.agent_id,
        expires_in=expires_in, actor=actor, rotated_from=old.key_id,
    )
    new_id = key_id_of(secret)
    old.revoked_at = at + grace
    audit_key(session, old, "KEY_ROTATED", actor, replaced_by=new_id, old_key_revoked_at=old.revoked_at,
              new_key_expires_at=(at + expires_in) if expires_in is not None else None)
    session.flush()
    new = session.execute(select(ApiKey).where(ApiKey.key_id == new_id)).scalar_one()
    return secret, _info(new, at)
