"""The per-tenant loop of the scheduled sweeps (retention, embedding, session commits), written once.

A sweep lists the tenants with one activity, then does its work tenant after tenant, in order (the order of
the commands is part of the workflow's history, so it is the same on every replay), and sums what each did.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.types import MethodAsyncSingleParam, ParamType, ReturnType, SelfType
from temporalio.workflow import ParentClosePolicy

from workflows.fairness import tenant_priority

with workflow.unsafe.imports_passed_through():
    from activities.tenants import TenantActivities

SHARED_TENANTS = "one-tenants-activity"
"""EmbeddingSweep runs started before the sweeps shared :meth:`TenantActivities.tenants` replay with the
``embedding_tenants`` activity they scheduled."""


@dataclass(frozen=True)
class Swept:
    tenants: int
    total: int
    """The sum of what the sweep's per-tenant work counted (jobs opened, vectors written, commits started)."""


async def each_tenant(per_tenant: Callable[[str], Awaitable[int]], *, before_shared: bool = False) -> Swept:
    """Run ``per_tenant`` for every tenant, one after the other; ``before_shared``: list them by the activity
    name a run started before :data:`SHARED_TENANTS` used (see :class:`~activities.tenants.TenantActivities`)."""
    listing = TenantActivities.embedding_tenants if before_shared else TenantActivities.tenants
    tenants = await workflow.execute_activity_method(listing, start_to_close_timeout=timedelta(minutes=1))
    total = 0
    for tenant in tenants:
        total += await per_tenant(tenant)
    return Swept(len(tenants), total)


async def start_once(
    run: MethodAsyncSingleParam[SelfType, ParamType, ReturnType], arg: ParamType, *, workflow_id: str, tenant_id: str
) -> int:
    """Start a child workflow that outlives the sweep, unless one with its id ran or runs: 1 if started, else 0."""
    try:
        await workflow.start_child_workflow(
            run, arg, id=workflow_id, priority=tenant_priority(tenant_id),
            parent_close_policy=ParentClosePolicy.ABANDON,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        return 0  # an earlier sweep started it; it is running or done
    return 1
