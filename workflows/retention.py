"""RetentionSweepWorkflow: started by a Temporal Schedule; opens a deletion job per expired record.

Each job then runs its own DeletionWorkflow (barrier, purge, verification), exactly
like a user's request, so retention gets the same guarantees and the same evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from workflows.fairness import tenant_priority

with workflow.unsafe.imports_passed_through():
    from activities.retention import RetentionActivities, SweepRequest
    from workflows.deletion import DeletionInput, DeletionWorkflow

SCHEDULE_ID = "mnemo-retention-sweep"


@dataclass(frozen=True)
class SweepInput:
    limit_per_tenant: int = 500


@dataclass(frozen=True)
class SweepResult:
    tenants: int
    jobs_opened: int


@workflow.defn(name="RetentionSweep")
class RetentionSweepWorkflow:
    @workflow.run
    async def run(self, request: SweepInput) -> SweepResult:
        tenants = await workflow.execute_activity_method(
            RetentionActivities.tenants, start_to_close_timeout=timedelta(minutes=1)
        )
        opened = 0
        for tenant in tenants:
            jobs = await workflow.execute_activity_method(
                RetentionActivities.open_jobs,
                SweepRequest(tenant, request.limit_per_tenant),
                start_to_close_timeout=timedelta(minutes=10),
            )
            for job in jobs:
                if job.status == "completed":
                    continue
                try:
                    await workflow.start_child_workflow(
                        DeletionWorkflow.run,
                        DeletionInput(tenant_id=job.tenant_id, job_id=job.job_id),
                        id=job.workflow_id,
                        priority=tenant_priority(job.tenant_id),
                        parent_close_policy=ParentClosePolicy.ABANDON,
                        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    )
                    opened += 1
                except WorkflowAlreadyStartedError:
                    pass  # an earlier sweep opened it; it is running or done
        return SweepResult(tenants=len(tenants), jobs_opened=opened)
