"""The report task engine's activities: every read-model write and every side effect of a task.

Split by concern (:mod:`~activities.tasks.steps`, :mod:`~activities.tasks.agents`,
:mod:`~activities.tasks.approvals`, :mod:`~activities.tasks.publish`) over one shared base; :class:`TaskActivities`
is the one object a worker registers. The workflow names the activities by their ``TaskActivities`` methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.tasks.agents import AgentStepActivities
from activities.tasks.approvals import ApprovalActivities
from activities.tasks.publish import PublishActivities
from activities.tasks.reminders import ReminderActivities
from activities.tasks.steps import StepActivities


class TaskActivities(StepActivities, AgentStepActivities, ApprovalActivities, ReminderActivities, PublishActivities):
    """Holds the engine, the artifact store, the publication destinations and the fault plan."""

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.create_task,
            self.run_step,
            self.open_agent_step,
            self.collect_agent_step,
            self.transition,
            self.request_approval,
            self.decide_approval,
            self.remind_approval,
            self.deliver_reminder,
            self.expire_approval,
            self.publish,
            self.reconcile,
            self.resolve_operation,
        ]
