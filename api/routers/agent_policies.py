"""Per-agent resource policies (:mod:`memory.resources.agent_policies`): an admin sets and deletes them, an
admin or auditor reads them. Not the tenant's policy (``/tenant-policy``)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import CatalogDep, CurrentPrincipal, EngineDep
from api.routers.runs import grant_out
from api.schemas.runs import AgentPoliciesOut, AgentPolicyOut, PolicyDeletedOut, PolicyIn
from memory.db import tenant_session
from memory.resources.agent_policies import delete_policy, get_policy, list_policies, set_policy
from memory.resources.run_models import ResourcePolicy

router = APIRouter(tags=["policies"])


def policy_out(row: ResourcePolicy) -> AgentPolicyOut:
    return AgentPolicyOut(agent_id=row.agent_id, resource=row.resource, operations=sorted(row.operations),
                          fields=sorted(row.fields), updated_at=row.updated_at, updated_by=row.updated_by)


@router.put("/policies/{agent_id}/{resource}")
def put_agent_policy(agent_id: str, resource: str, body: PolicyIn, principal: CurrentPrincipal, engine: EngineDep,
                     catalog: CatalogDep) -> AgentPolicyOut:
    """An admin sets what the agent may do with the type (replacing what it could); the agent's next read sees
    it, a run already started never gains by it. Audited as ``RESOURCE_POLICY_CHANGED``."""
    with tenant_session(engine, principal.tenant_id) as session:
        return policy_out(set_policy(session, principal, catalog, agent_id, resource, body.operations, body.fields))


@router.get("/policies/{agent_id}")
def read_agent_policies(agent_id: str, principal: CurrentPrincipal, engine: EngineDep) -> AgentPoliciesOut:
    """The agent's policies, by type; a type not listed is one the agent may not use."""
    with tenant_session(engine, principal.tenant_id) as session:
        rows = list_policies(session, principal, agent_id)
    return AgentPoliciesOut(agent_id=agent_id, policies=[policy_out(row) for row in rows])


@router.get("/policies/{agent_id}/{resource}")
def read_agent_policy(agent_id: str, resource: str, principal: CurrentPrincipal, engine: EngineDep) -> AgentPolicyOut:
    """One policy; none set is a 404 ``policy_not_found``."""
    with tenant_session(engine, principal.tenant_id) as session:
        return policy_out(get_policy(session, principal, agent_id, resource))


@router.delete("/policies/{agent_id}/{resource}")
def delete_agent_policy(agent_id: str, resource: str, principal: CurrentPrincipal,
                        engine: EngineDep) -> PolicyDeletedOut:
    """An admin revokes the agent's use of the type: its very next read, in a run or not, no longer sees it."""
    with tenant_session(engine, principal.tenant_id) as session:
        revoked = delete_policy(session, principal, agent_id, resource)
    return PolicyDeletedOut(agent_id=agent_id, resource=resource, revoked=grant_out(revoked))
