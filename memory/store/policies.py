"""Tenant policies: rules an admin sets for the whole tenant, read where they apply.

``separation_of_duties`` (on by default): the owner of a report task may not approve or reject
their own draft, even holding the ``approver`` role (issue 12, finding 5). The rule is checked
by the task workflow's decision validator; the API reads the policy at decision time, so a
change applies to the very next decision. Every change is audited (``TENANT_POLICY_CHANGED``,
with the values before and after).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.enums import Role
from memory.errors import Forbidden
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry, TenantPolicy


@dataclass(frozen=True)
class Policy:
    separation_of_duties: bool = True
    """A task's owner may not decide on their own draft."""


def tenant_policy(session: Session, tenant_id: str) -> Policy:
    """The tenant's policy: its stored row, or the defaults."""
    row = session.execute(select(TenantPolicy).where(TenantPolicy.tenant_id == tenant_id)).scalar_one_or_none()
    return Policy() if row is None else Policy(separation_of_duties=row.separation_of_duties)


def change_policy(session: Session, principal: PrincipalContext, **changes: bool) -> Policy:
    """An admin changes the tenant's policy; the change and the values it replaced are audited."""
    if not principal.has(Role.ADMIN):
        raise Forbidden("changing the tenant's policy needs the admin role")
    before = tenant_policy(session, principal.tenant_id)
    after = replace(before, **changes)
    values = {**asdict(after), "updated_by": principal.user_id}
    session.execute(
        insert(TenantPolicy)
        .values(tenant_id=principal.tenant_id, **values)
        .on_conflict_do_update(index_elements=[TenantPolicy.tenant_id], set_=values)
    )
    session.add(
        AuditEntry(
            tenant_id=principal.tenant_id, actor=principal.user_id, action="TENANT_POLICY_CHANGED",
            detail={"before": asdict(before), "after": asdict(after), "key_id": principal.key_id},
        )
    )
    session.flush()
    return after
