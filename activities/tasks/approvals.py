"""Approval activities: request one for the current draft, record a decision, remind, expire.

What a request is bound to, and how a decision moves the task, is :mod:`memory.tasks.approvals`.
"""

from __future__ import annotations

import uuid

from temporalio import activity

from activities.tasks.base import TaskActivitiesBase
from activities.tasks.payloads import (
    ApprovalRequested,
    DecideInput,
    ExpireInput,
    ReminderInput,
    RequestApprovalInput,
    RunStepInput,
)
from memory.tasks import approvals, registry
from memory.tasks.transitions import Snapshot


class ApprovalActivities(TaskActivitiesBase):
    @activity.defn(name="task_request_approval")
    def request_approval(self, req: RequestApprovalInput) -> ApprovalRequested:
        """Create the approval request bound to the artifact's hash, and wait (RUNNING → WAITING_FOR_APPROVAL).
        What the approver is asked: the type's ``summary`` hook, else the type, version and artifact."""
        hook = registry.hook(req.task_type, req.step_id)
        summary = f"{req.task_type} {req.version}: approve {req.draft_sha256}"
        if hook is not None:
            step_input = RunStepInput(
                req.tenant_id, req.task_id, req.task_type, req.step_id, None, "v1", req.goal, req.inputs,
                {"artifact_sha256": req.draft_sha256}, req.expected_version,
            )
            summary = str(hook(self._context(step_input)).output["summary"])
        with self._tx(req.tenant_id) as session:
            approval, snapshot = approvals.open_request(
                session,
                req.ref,
                draft_sha256=req.draft_sha256,
                approval_type=req.approval_type,
                deadline_at=req.deadline_at,
                expected_version=req.expected_version,
                step_id=req.step_id,
            )
        return ApprovalRequested(str(approval.approval_id), req.approval_type, summary, snapshot.state_version)

    @activity.defn(name="task_decide_approval")
    def decide_approval(self, req: DecideInput) -> Snapshot:
        """Record an approver's decision; approval → READY (publish), rejection → RUNNING (redraft)."""
        with self._tx(req.tenant_id) as session:
            return approvals.decide(
                session,
                req.ref,
                uuid.UUID(req.approval_id),
                approved=req.decision == "approve",
                user_id=req.user_id,
                roles=req.roles,
                reason=req.reason,
                expected_version=req.expected_version,
                redraft_step=req.redraft_step,
                step_id=req.step_id,
                next_step_id=req.next_step_id,
            )

    @activity.defn(name="task_remind_approval")
    def remind_approval(self, req: ReminderInput) -> bool:
        """Send reminder ``number`` once (recorded; idempotent by approval and number)."""
        with self._tx(req.tenant_id) as session:
            approval = approvals.get_approval(session, req.tenant_id, uuid.UUID(req.approval_id))
            if approval.status != "PENDING":
                return False
            return approvals.record_reminder(session, req.tenant_id, approval.approval_id, req.number)

    @activity.defn(name="task_expire_approval")
    def expire_approval(self, req: ExpireInput) -> Snapshot:
        with self._tx(req.tenant_id) as session:
            return approvals.expire(session, req.ref, uuid.UUID(req.approval_id), expected_version=req.expected_version)
