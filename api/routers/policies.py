"""The tenant's policy (:mod:`memory.store.policies`): anyone in the tenant reads it, an admin changes it."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from api.deps import CurrentPrincipal, EngineDep
from api.schemas.policies import PolicyIn, PolicyOut
from memory.db import tenant_session
from memory.store.policies import change_policy, tenant_policy

router = APIRouter(tags=["policies"])


@router.get("/tenant-policy")
def read_policy(principal: CurrentPrincipal, engine: EngineDep) -> PolicyOut:
    """The rules that apply to your tenant (defaults where an admin changed nothing)."""
    with tenant_session(engine, principal.tenant_id) as session:
        return PolicyOut(**asdict(tenant_policy(session, principal.tenant_id)))


@router.put("/tenant-policy")
def put_policy(body: PolicyIn, principal: CurrentPrincipal, engine: EngineDep) -> PolicyOut:
    """An admin sets the tenant's rules; audited as ``TENANT_POLICY_CHANGED``."""
    with tenant_session(engine, principal.tenant_id) as session:
        return PolicyOut(**asdict(change_policy(session, principal, **body.model_dump())))
