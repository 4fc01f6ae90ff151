"""RetentionSweepWorkflow: started by a Temporal Schedule; opens a deletion job per expired record.

Each job then runs its own DeletionWorkflow (barrier, purge, verification), exactly
like a user's request, so retention gets the same guarantees and the same evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow

from workflows.sweeps import SweepPaging, continue_if_stopped, each_tenant, start_once

with workflow.unsafe.imports_passed_through():
    from activities.retention import RetentionActivities, SweepRequest
    from activities.tenants import SweepKind
    from workflows.deletion import DeletionInput, DeletionWorkflow

SCHEDULE_ID = "mnemo-retention-sweep"


@dataclass(frozen=True)
class SweepInput:
    limit_per_tenant: int = 500
    paging: SweepPaging = field(default_factory=SweepPaging)


@dataclass(frozen=True)
class SweepResult:
    tenants: int
    jobs_opened: int


@workflow.defn(name="RetentionSweep")
class RetentionSweepWorkflow:
    @workflow.run
    async def run(self, request: SweepInput) -> SweepResult:
        async def open_jobs(tenant: str) -> int:
            jobs = await workflow.execute_activity_method(
                RetentionActivities.open_jobs,
                SweepRequest(tenant, request.limit_per_tenant),
                start_to_close_timeout=timedelta(minutes=10),
            )
            opened = 0
            for job in jobs:
                if job.status != "completed":  # an open job an earlier sweep started is left to its run
                    child = DeletionInput(tenant_id=job.tenant_id, job_id=job.job_id)
                    opened += await start_once(DeletionWorkflow.run, child, workflow_id=job.workflow_id,
                                               tenant_id=job.tenant_id)
            return opened

        swept = await each_tenant(open_jobs, SweepKind.EVERY, request.paging)
        continue_if_stopped(swept, request)
        return SweepResult(tenants=swept.tenants, jobs_opened=swept.total)
