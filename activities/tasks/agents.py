"""The workflow's two calls around an agent-performed step (:mod:`memory.tasks.leases`): open it, collect it."""

from __future__ import annotations

from temporalio import activity

from activities.tasks.base import TaskActivitiesBase
from activities.tasks.payloads import AgentStepCollected, CollectAgentStepInput, OpenAgentStepInput
from memory.tasks import leases
from memory.tasks.transitions import Snapshot


class AgentStepActivities(TaskActivitiesBase):
    @activity.defn(name="task_open_agent_step")
    def open_agent_step(self, req: OpenAgentStepInput) -> Snapshot:
        """The step waits for an agent's claim, and the task for the agent (``WAITING_FOR_EXTERNAL``/``AGENT``)."""
        with self._tx(req.tenant_id) as session:
            return leases.open_agent_step(session, req.ref, step_id=req.step_id, input_version=req.input_version,
                                          extra=req.extra, expected_version=req.expected_version)

    @activity.defn(name="task_collect_agent_step")
    def collect_agent_step(self, req: CollectAgentStepInput) -> AgentStepCollected:
        """What the agents did so far: the step's result (the task moves on), their giving up, or nothing yet."""
        with self._tx(req.tenant_id) as session:
            outcome = leases.collect_agent_step(
                session, req.ref, step_id=req.step_id, input_version=req.input_version,
                next_step_id=req.next_step_id, expected_version=req.expected_version)
        return AgentStepCollected(
            outcome.status, outcome.state_version, outcome.output or {},
            {artifact["name"]: artifact["sha256"] for artifact in outcome.artifacts}, outcome.error)
