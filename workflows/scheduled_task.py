"""ScheduledTaskWorkflow: one firing of a task schedule, started by its Temporal Schedule.

It reads its nominal fire time (Temporal's ``TemporalScheduledStartTime``), asks one activity what task the firing
starts (none while the schedule's row is paused or gone), and starts it as a child workflow under the task's own
deterministic workflow id, abandoned when this one ends. A child rather than a client call from the activity: the
start is then part of this workflow's history (retried by Temporal, never twice), and the workflow id
``task-{tenant}-{task}``, a function of the firing's intent, makes a second delivery of the same fire time (or a
backfill of it) answer "already started" instead of starting a second task.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from activities.tasks.schedules import FireInput, ScheduleActivities
    from memory.tasks.keys import workflow_id
    from memory.tasks.schedule_store import Firing  # its module in the sandbox: the result's hints resolve there
    from workflows import search_attributes
    from workflows.fairness import tenant_priority
    from workflows.report_task import ReportTaskInput, ReportTaskWorkflow
    from workflows.task_support import WRITE_OPTIONS


@dataclass(frozen=True)
class ScheduledStart:
    tenant_id: str
    name: str


def schedule_id(tenant_id: str, name: str) -> str:
    """The Temporal Schedule of a tenant's schedule (names are per tenant)."""
    return f"task-schedule-{tenant_id}-{name}"


@workflow.defn(name="ScheduledTask")
class ScheduledTaskWorkflow:
    @workflow.run
    async def run(self, start: ScheduledStart) -> str | None:
        """The started (or already started) task's id; None when the schedule is paused or gone."""
        info = workflow.info()
        fire_time = info.typed_search_attributes.get(search_attributes.SCHEDULED_START)
        if fire_time is None:
            raise ApplicationError("started without a schedule's fire time", type="not_scheduled", non_retryable=True)
        firing: Firing | None = await workflow.execute_activity_method(
            ScheduleActivities.fire, FireInput(start.tenant_id, start.name, fire_time.isoformat()), **WRITE_OPTIONS
        )
        if firing is None:
            return None
        task = ReportTaskInput(
            start.tenant_id, firing.task_id, firing.owner_user_id, firing.task_type, firing.goal,
            firing.request_intent_id, definition=firing.definition,
        )
        # This fire time's task exists already: a second delivery starts nothing.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await workflow.start_child_workflow(
                ReportTaskWorkflow.run, task, id=workflow_id(task.tenant_id, task.task_id),
                task_queue=info.task_queue, parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=search_attributes.new_task(task.tenant_id, task.task_type),
                priority=tenant_priority(task.tenant_id),
            )
        return firing.task_id
