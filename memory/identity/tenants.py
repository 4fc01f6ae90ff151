"""The tenants a sweep walks: every tenant row, in a stable order."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.models import Tenant


def tenant_ids(session: Session) -> list[str]:
    """Every tenant's id, sorted (a sweep visits them in the same order each time)."""
    return list(session.execute(select(Tenant.tenant_id).order_by(Tenant.tenant_id)).scalars())
