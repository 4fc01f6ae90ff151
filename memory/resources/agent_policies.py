"""Per-agent resource policies (seed 000 §3.1, the "current Config"): per tenant × agent × resource type, the
operations and field paths an admin lets that agent use.

An agent with no policy for a type may not use the type at all: access is granted, never assumed. A policy is
checked against the type's declaration when it is set (a path the schema does not have, an operation the type
does not offer, a field set that leaves out the title → 422 naming it), so every stored policy can be honoured.
Every change is audited (``RESOURCE_POLICY_CHANGED``, with the policy before and after; after is null for a
deletion). This is not the *tenant* policy of :mod:`memory.store.policies`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.enums import Role
from memory.errors import Forbidden, InvalidInput, NotFound
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry
from memory.resources import pointers
from memory.resources.access import Grant
from memory.resources.catalog import Catalog
from memory.resources.declarations import Declaration, Operation
from memory.resources.pointers import PointerError
from memory.resources.run_models import ResourcePolicy

AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._:-]{0,127}")
"""An agent id as it appears in a path and a run (the shape of a user id)."""


def check_agent_id(agent_id: str) -> str:
    if not AGENT_ID.fullmatch(agent_id):
        raise InvalidInput("agent ids are 1-128 letters, digits or . @ _ : -, starting with a letter or digit",
                           code="invalid_agent_id")
    return agent_id


def _require_admin(principal: PrincipalContext) -> None:
    if not principal.has(Role.ADMIN):
        raise Forbidden("changing an agent's resource policy needs the admin role")


def _require_reader(principal: PrincipalContext) -> None:
    if not (principal.has(Role.ADMIN) or principal.has(Role.AUDITOR)):
        raise Forbidden("reading an agent's resource policies needs the admin or auditor role")


def grant_of(row: ResourcePolicy) -> Grant:
    return Grant(row.resource, frozenset(Operation(name) for name in row.operations), tuple(sorted(row.fields)))


def _as_detail(grant: Grant | None) -> dict[str, Any] | None:
    if grant is None:
        return None
    return {"operations": sorted(op.value for op in grant.operations), "fields": list(grant.fields)}


def _checked(declaration: Declaration, operations: Iterable[str], fields: Iterable[str]) -> Grant:
    """The grant a policy would be, or a 422 naming the first operation or path the declaration cannot honour."""
    operations, fields = list(operations), list(fields)
    if not operations or not fields:
        raise InvalidInput("a policy names at least one operation and one field; to revoke all, delete it",
                           code="empty_policy")
    if len(set(operations)) != len(operations) or len(set(fields)) != len(fields):
        raise InvalidInput("operations and fields must each be distinct", code="duplicate_entry")
    for name in operations:
        if name not in {op.value for op in declaration.operations}:
            offered = sorted(op.value for op in declaration.operations)
            raise InvalidInput(f"{declaration.type} does not offer the operation {name!r}; it offers {offered}",
                               code="unknown_operation", details={"operation": name})
    for path in fields:
        try:
            pointers.schema_at(declaration.schema, path)
        except PointerError as exc:
            raise InvalidInput(f"field {path!r} of {declaration.type}: {exc}", code="unknown_field_path",
                               details={"field": path}) from exc
    if not any(pointers.covers(path, declaration.title) for path in fields):
        raise InvalidInput(f"a policy on {declaration.type} must let the agent read its title {declaration.title!r}:"
                           " every result names its record by it", code="title_not_granted")
    return Grant(declaration.type, frozenset(Operation(name) for name in operations), tuple(sorted(fields)))


def current_policies(session: Session, tenant_id: str, agent_id: str) -> dict[str, Grant]:
    """The agent's policies now, by resource type (no role check: what a read of that agent is allowed)."""
    rows = session.execute(
        select(ResourcePolicy).where(ResourcePolicy.tenant_id == tenant_id, ResourcePolicy.agent_id == agent_id)
    ).scalars()
    return {row.resource: grant_of(row) for row in rows}


def _row(session: Session, tenant_id: str, agent_id: str, resource: str) -> ResourcePolicy | None:
    return session.execute(
        select(ResourcePolicy).where(ResourcePolicy.tenant_id == tenant_id, ResourcePolicy.agent_id == agent_id,
                                     ResourcePolicy.resource == resource).with_for_update()
    ).scalar_one_or_none()


def _audit(session: Session, principal: PrincipalContext, agent_id: str, resource: str, before: Grant | None,
           after: Grant | None) -> None:
    session.add(AuditEntry(
        tenant_id=principal.tenant_id, actor=principal.user_id, action="RESOURCE_POLICY_CHANGED",
        detail={"agent_id": agent_id, "resource": resource, "before": _as_detail(before), "after": _as_detail(after),
                "key_id": principal.key_id},
    ))


def set_policy(session: Session, principal: PrincipalContext, catalog: Catalog, agent_id: str, resource: str,
               operations: Iterable[str], fields: Iterable[str]) -> ResourcePolicy:
    """An admin sets what ``agent_id`` may do with the declared type; the next read of that agent sees it."""
    _require_admin(principal)
    check_agent_id(agent_id)
    declaration = catalog.get(resource)
    grant = _checked(declaration, operations, fields)
    existing = _row(session, principal.tenant_id, agent_id, declaration.type)
    before = None if existing is None else grant_of(existing)
    values = {"operations": sorted(op.value for op in grant.operations), "fields": list(grant.fields),
              "updated_by": principal.user_id}
    row = session.execute(
        insert(ResourcePolicy)
        .values(tenant_id=principal.tenant_id, agent_id=agent_id, resource=declaration.type, **values)
        .on_conflict_do_update(index_elements=[ResourcePolicy.tenant_id, ResourcePolicy.agent_id,
                                               ResourcePolicy.resource],
                               set_={**values, "updated_at": func.now()})
        .returning(ResourcePolicy),
        execution_options={"populate_existing": True},
    ).scalar_one()
    _audit(session, principal, agent_id, declaration.type, before, grant)
    session.flush()
    return row


def get_policy(session: Session, principal: PrincipalContext, agent_id: str, resource: str) -> ResourcePolicy:
    """One policy; none set is a 404 ``policy_not_found`` (the agent may not use the type)."""
    _require_reader(principal)
    check_agent_id(agent_id)
    row = session.execute(
        select(ResourcePolicy).where(ResourcePolicy.tenant_id == principal.tenant_id,
                                     ResourcePolicy.agent_id == agent_id, ResourcePolicy.resource == resource)
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(f"agent {agent_id} has no policy for {resource}: it may not use it", code="policy_not_found")
    return row


def list_policies(session: Session, principal: PrincipalContext, agent_id: str) -> list[ResourcePolicy]:
    """The agent's policies by resource type; none is an empty list (the agent may use no type)."""
    _require_reader(principal)
    check_agent_id(agent_id)
    return list(session.execute(
        select(ResourcePolicy)
        .where(ResourcePolicy.tenant_id == principal.tenant_id, ResourcePolicy.agent_id == agent_id)
        .order_by(ResourcePolicy.resource)
    ).scalars())


def delete_policy(session: Session, principal: PrincipalContext, agent_id: str, resource: str) -> Grant:
    """An admin revokes the agent's use of the type (its very next read no longer sees it); what it revoked."""
    _require_admin(principal)
    check_agent_id(agent_id)
    existing = _row(session, principal.tenant_id, agent_id, resource)
    if existing is None:
        raise NotFound(f"agent {agent_id} has no policy for {resource}", code="policy_not_found")
    session.execute(delete(ResourcePolicy).where(ResourcePolicy.tenant_id == principal.tenant_id,
                                                 ResourcePolicy.agent_id == agent_id,
                                                 ResourcePolicy.resource == resource))
    revoked = grant_of(existing)
    _audit(session, principal, agent_id, resource, revoked, None)
    session.flush()
    return revoked
