"""API keys and the principal they authenticate.

A key looks like ``mnemo_<key id>_<secret>``. Only the SHA-256 of the secret is
stored: the secret is 32 random bytes, so a slow password hash would add cost
without adding safety. Identity (tenant, user, agent, roles) is read from the
key's row, never from anything a request carries. A key may expire
(``expires_at``) and be revoked now or at a set instant (``revoked_at``, a
rotation's grace period); listing, revoking and rotating live in
:mod:`memory.identity.keys`. Every change to a key is written to the tenant's audit log.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, and_, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.db import enter_tenant, global_session
from memory.enums import Role
from memory.errors import Forbidden, InvalidInput, Unauthorized
from memory.models import ApiKey, AuditEntry, Principal, Tenant

KEY_PREFIX = "mnemo"
_KEY_FORMAT = re.compile(r"^mnemo_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{43})$")
_TENANT_FORMAT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_USER_FORMAT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._:-]{0,127}$")
MIN_LIFETIME = timedelta(minutes=1)
MAX_LIFETIME = timedelta(days=3650)


@dataclass(frozen=True)
class PrincipalContext:
    """Who is calling, as established by their credential."""

    tenant_id: str
    user_id: str
    agent_id: str | None
    roles: frozenset[str]
    key_id: str

    def has(self, role: Role) -> bool:
        return holds(self.roles, role)


# --- role predicates: the one place that says which roles allow what on a task ---------------------
# (What a role allows on a memory is the table in :mod:`memory.store.permissions`.) They take role names,
# not a principal, because the workflow's validators and the activities see only the names a request
# or a key row carries.


def holds(roles: Iterable[str], role: Role) -> bool:
    """``admin`` holds every role."""
    names = set(roles)
    return Role.ADMIN.value in names or role.value in names


def may_approve(roles: Iterable[str]) -> bool:
    """Approve or reject a task's draft; a publish needs its approver to still hold this."""
    return holds(roles, Role.APPROVER)


def may_operate(roles: Iterable[str]) -> bool:
    """Resolve an operation, load sample data, and pause, resume or cancel another user's task."""
    return holds(roles, Role.OPERATOR)


def may_read_every_task(roles: Iterable[str]) -> bool:
    """Read (and list) every task of the tenant, not only one's own."""
    names = set(roles)
    return any(holds(names, role) for role in (Role.APPROVER, Role.OPERATOR, Role.AUDITOR))


def may_control_task(user_id: str, roles: Iterable[str], owner_user_id: str) -> bool:
    """Pause, resume or cancel: the task's owner, or an operator."""
    return user_id == owner_user_id or may_operate(roles)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_roles(raw: str) -> list[str]:
    """Comma-separated role names, each one a known :class:`Role`."""
    names = [name.strip() for name in raw.split(",") if name.strip()]
    known = {role.value for role in Role}
    unknown = sorted(set(names) - known)
    if unknown:
        raise InvalidInput(
            f"unknown role(s) {', '.join(unknown)}; known roles are {', '.join(sorted(known))}",
            code="unknown_role",
        )
    return sorted(set(names))


def now() -> datetime:
    """The instant key validity is judged at (one clock for expiry, revocation and grace periods)."""
    return datetime.now(UTC)


def key_is_active(at: datetime | None = None) -> ColumnElement[bool]:
    """SQL: the key is neither revoked nor expired at ``at`` (for checks that read keys in bulk)."""
    at = at or now()
    return and_(
        or_(ApiKey.revoked_at.is_(None), ApiKey.revoked_at > at),
        or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > at),
    )


def audit_key(session: Session, key: ApiKey, action: str, actor: str, **detail: Any) -> None:
    """One audit-log row for a change to ``key`` (ids, roles and instants, never the secret or its hash).

    The audit log is tenant-scoped (row-level security), so this enters the key's tenant for the rest of
    the transaction; key rows themselves are global.
    """
    enter_tenant(session, key.tenant_id)
    session.add(
        AuditEntry(
            tenant_id=key.tenant_id,
            actor=actor,
            action=action,
            detail={
                "key_id": key.key_id,
                "user_id": key.user_id,
                "agent_id": key.agent_id,
                "roles": list(key.roles),
                **{name: value.isoformat() if isinstance(value, datetime) else value for name, value in detail.items()},
            },
        )
    )


def check_lifetime(lifetime: timedelta, what: str = "expires_in") -> timedelta:
    if not MIN_LIFETIME <= lifetime <= MAX_LIFETIME:
        raise InvalidInput(f"{what} must be between 1 minute and 3650 days", code="invalid_lifetime")
    return lifetime


def create_api_key(
    session: Session,
    *,
    tenant_id: str,
    user_id: str,
    roles: list[str],
    agent_id: str | None = None,
    expires_in: timedelta | None = None,
    actor: str = "system",
    rotated_from: str | None = None,
) -> str:
    """Create the tenant and principal if needed, store a new key's hash and return the key (once).

    ``expires_in``: the key is refused with ``key_expired`` after that long (none: until revoked).
    ``actor`` is who the audit log names as having created it.
    """
    if not _TENANT_FORMAT.match(tenant_id):
        raise InvalidInput("tenant ids are 1-63 lowercase letters, digits, '-' or '_'", code="invalid_tenant")
    if not _USER_FORMAT.match(user_id):
        raise InvalidInput("user ids are 1-128 letters, digits or . @ _ : -", code="invalid_user")
    roles = parse_roles(",".join(roles))
    expires_at = now() + check_lifetime(expires_in) if expires_in is not None else None
    session.execute(insert(Tenant).values(tenant_id=tenant_id).on_conflict_do_nothing())
    session.execute(insert(Principal).values(tenant_id=tenant_id, user_id=user_id).on_conflict_do_nothing())
    key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))
    secret = secrets.token_urlsafe(32)
    key = ApiKey(
        key_id=key_id,
        tenant_id=tenant_id,
        user_id=user_id,
        agent_id=agent_id,
        roles=roles,
        secret_sha256=_digest(secret),
        expires_at=expires_at,
        rotated_from=rotated_from,
    )
    session.add(key)
    session.flush()
    if rotated_from is None:
        audit_key(session, key, "KEY_CREATED", actor, expires_at=expires_at)
    return f"{KEY_PREFIX}_{key_id}_{secret}"


def authenticate(session: Session, presented: str) -> PrincipalContext:
    """Resolve a presented key to its principal, or raise :class:`Unauthorized`."""
    match = _KEY_FORMAT.match(presented)
    if match is None:
        raise Unauthorized("the API key is malformed; send `Authorization: Bearer mnemo_...`")
    key_id, secret = match.groups()
    row = session.execute(select(ApiKey).where(ApiKey.key_id == key_id)).scalar_one_or_none()
    if row is None or not hmac.compare_digest(row.secret_sha256, _digest(secret)):
        raise Unauthorized("the API key is unknown or revoked")
    return _still_valid(row)


def reauthenticate(session: Session, key_id: str) -> PrincipalContext:
    """The principal of a key the caller proved earlier (a console session holds its id, never its secret),
    judged again now: revoked or expired since is :class:`Unauthorized`, exactly as :func:`authenticate`."""
    row = session.execute(select(ApiKey).where(ApiKey.key_id == key_id)).scalar_one_or_none()
    if row is None:
        raise Unauthorized("the API key is unknown or revoked")
    return _still_valid(row)


def _still_valid(row: ApiKey) -> PrincipalContext:
    at = now()
    if row.revoked_at is not None and row.revoked_at <= at:
        raise Unauthorized("the API key is unknown or revoked")
    if row.expires_at is not None and row.expires_at <= at:
        # Only the holder of the secret learns this: a wrong secret gets the sentence above.
        raise Unauthorized(
            f"the API key expired at {row.expires_at.isoformat()}; ask an admin for a new one (`mnemo keys rotate`)",
            code="key_expired",
        )
    return PrincipalContext(
        tenant_id=row.tenant_id,
        user_id=row.user_id,
        agent_id=row.agent_id,
        roles=frozenset(row.roles),
        key_id=row.key_id,
    )


@contextmanager
def authenticated_session(engine: Engine, presented: str) -> Iterator[tuple[Session, PrincipalContext]]:
    """One transaction that first authenticates ``presented``, then acts in its principal's tenant.

    For a request whose work is one transaction (recall): the key check is its first statement, on
    the same connection, instead of a transaction of its own before it (a second checkout, ping and
    commit: ~2 ms a request here). The transaction starts as :func:`memory.db.global_session` (where API
    keys are read) and continues as the key's tenant.
    """
    with global_session(engine) as session:
        principal = authenticate(session, presented)
        enter_tenant(session, principal.tenant_id)
        yield session, principal


def require_role(principal: PrincipalContext, *roles: Role, to: str) -> None:
    """A 403 ``{to} needs the {roles} role`` unless the principal has one of ``roles`` (an admin has every role)."""
    if not any(principal.has(role) for role in roles):
        names = [role.value for role in roles]
        spoken = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise Forbidden(f"{to} needs the {spoken} role")
