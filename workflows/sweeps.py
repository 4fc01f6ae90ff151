"""The per-tenant loop of the scheduled sweeps (retention, embedding, session commits, knowledge reviews),
written once.

A sweep lists tenants a page at a time — only those with work by its own rule, where it has one — does its
work tenant after tenant, in order (the order of the commands is part of the workflow's history, so it is the
same on every replay), and sums what each did. Its cost follows the tenants with work, not the tenants that
exist; a run whose history grows past its budget stops and the sweep continues as new after the last tenant
it finished, so no run outgrows Temporal's history limit however many tenants have work. (The budget is
checked between tenants: one tenant's work is bounded by its own sweep — the embedding sweep drains a
tenant's whole backlog in one run, about six events per activity of eight batches.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Protocol, TypeVar

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.types import MethodAsyncSingleParam, ParamType, ReturnType, SelfType
from temporalio.workflow import ParentClosePolicy

from workflows.fairness import tenant_priority

with workflow.unsafe.imports_passed_through():
    from activities.tenants import SweepKind, TenantActivities, TenantPageRequest

SHARED_TENANTS = "one-tenants-activity"
"""EmbeddingSweep runs started before the sweeps shared :meth:`TenantActivities.tenants` replay with the
``embedding_tenants`` activity they scheduled."""


DUE_TENANTS = "due-tenants"
"""Sweeps started before they listed tenants a page at a time (only those with work) replay the one listing of
every tenant they scheduled then."""


@dataclass(frozen=True)
class SweepPaging:
    """Where a sweep's run starts and how much it may do before it continues as new."""

    after: str | None = None
    """The last tenant an earlier run of this sweep finished (None: from the first)."""
    page: int = 200
    history_budget: int = 4_000
    """Events past which a run continues as new (Temporal suggests it near 4K events and fails a run at 51,200)."""


@dataclass(frozen=True)
class Swept:
    tenants: int
    total: int
    """The sum of what the sweep's per-tenant work counted (jobs opened, vectors written, commits started)."""
    resume: SweepPaging | None = None
    """Set when the run stopped to keep its history short: the sweep continues as new from here."""


async def each_tenant(per_tenant: Callable[[str], Awaitable[int]], kind: SweepKind, paging: SweepPaging, *,
                      before_shared: bool = False) -> Swept:
    """Run ``per_tenant`` for every tenant with work for ``kind``, one after the other, from ``paging.after``.

    ``before_shared``: a run started before :data:`SHARED_TENANTS` lists every tenant by the activity name it
    used then (see :class:`~activities.tenants.TenantActivities`); so does any run started before
    :data:`DUE_TENANTS`."""
    if before_shared or not workflow.patched(DUE_TENANTS):
        listing = TenantActivities.embedding_tenants if before_shared else TenantActivities.tenants
        tenants = await workflow.execute_activity_method(listing, start_to_close_timeout=timedelta(minutes=1))
        total = 0
        for tenant in tenants:
            total += await per_tenant(tenant)
        return Swept(len(tenants), total)
    visited = total = 0
    after = paging.after
    while True:
        page = await workflow.execute_activity_method(
            TenantActivities.tenant_page, TenantPageRequest(kind, after, paging.page),
            start_to_close_timeout=timedelta(minutes=1),
        )
        for tenant in page:
            total += await per_tenant(tenant)
            visited, after = visited + 1, tenant
            info = workflow.info()
            if info.is_continue_as_new_suggested() or info.get_current_history_length() > paging.history_budget:
                return Swept(visited, total, SweepPaging(after, paging.page, paging.history_budget))
        if len(page) < paging.page:
            return Swept(visited, total)


class PagedInput(Protocol):
    @property
    def paging(self) -> SweepPaging: ...


Input = TypeVar("Input", bound=PagedInput)


def continue_if_stopped(swept: Swept, request: Input) -> None:
    """Continue the sweep as new from where its run stopped (:attr:`Swept.resume`); nothing if it finished."""
    if swept.resume is not None:
        workflow.continue_as_new(replace(request, paging=swept.resume))  # type: ignore[type-var]


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
