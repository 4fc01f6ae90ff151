"""Ids: the ones a request names (a malformed one is a missing one) and the ones mnemo picks for a caller (the same
for the same caller and target, and nobody else can compute them).

Issue 23, "ids are owned": the default id of a ``DELETE`` that names none was predictable
(``memory-{id}-{user}``), so anyone could squat it with a no-op request and make the owner's ``DELETE`` a 409.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.errors import NotFound
from memory.identity.auth import PrincipalContext
from memory.models import Tenant


def default_request_id(session: Session, principal: PrincipalContext, kind: str, target: str) -> str:
    """The request id of a ``DELETE`` that names none: the same for the same caller and target (a repeat returns
    the same job), an HMAC under the tenant's secret so that nobody else can compute it."""
    secret = session.execute(
        select(Tenant.id_secret).where(Tenant.tenant_id == principal.tenant_id)
    ).scalar_one()
    message = "\x00".join((principal.tenant_id, principal.user_id, kind, target)).encode()
    return f"{kind}-{hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:40]}"


def parse_id(raw: str, what: str) -> uuid.UUID:
    """A path id: a malformed one is just an id that does not exist, the same 404 (``{what} {raw} does not
    exist``), never a 422."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NotFound(f"{what} {raw} does not exist") from None


__all__ = ["default_request_id", "parse_id"]
