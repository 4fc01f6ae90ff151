"""Publishing exactly once: the re-check, the send, and reconciling an outcome the send did not report.

A side effect whose outcome is unknown (a timeout after sending) is recorded as UNKNOWN_OUTCOME and
asked for by operation id (:meth:`PublishActivities.reconcile`), never blindly sent again; an operator
settles what nobody could reconcile (:meth:`PublishActivities.resolve_operation`).
"""

from __future__ import annotations

import uuid
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from activities.stores import DestinationTimeout, DestinationUnavailable
from activities.tasks.base import TaskActivitiesBase
from activities.tasks.payloads import OperationResult, PublishInput, ReconcileInput, ResolveInput, RunStepInput
from memory.artifact_store import read
from memory.knowledge.sources import propose_from_task
from memory.tasks import approvals, keys, operations, registry
from memory.tasks.artifacts import get_artifact
from memory.tasks.models import TaskOperation
from memory.tasks.states import TaskStatus, TransitionFacts
from memory.tasks.transitions import Transition, get_task, move

S = TaskStatus
Settled = PublishInput | ReconcileInput | ResolveInput


def _answer(op: TaskOperation, state_version: int) -> OperationResult:
    """What an operation already settled answers a retry with (FAILED: definitely not published)."""
    status = "ABSENT" if op.status == "FAILED" else op.status
    return OperationResult(status, state_version, op.publication_id, op.location)


class PublishActivities(TaskActivitiesBase):
    @activity.defn(name="task_publish")
    def publish(self, req: PublishInput) -> OperationResult:
        destination = self._destination(req.tenant_id, req.destination)
        key = keys.publish_key(req.task_id, req.artifact_sha256, req.destination)
        op_id = uuid.UUID(req.operation_id)
        with self._tx(req.tenant_id) as session:
            existing = session.get(TaskOperation, (req.tenant_id, op_id))
            task = get_task(session, req.tenant_id, req.task_id)
            if existing is not None and existing.status in operations.SETTLED:
                return OperationResult(existing.status, task.state_version, existing.publication_id, existing.location)
            version = task.state_version
            if existing is None:
                approvals.recheck_before_publish(
                    session,
                    req.ref,
                    uuid.UUID(req.approval_id),
                    artifact_sha256=req.artifact_sha256,
                    expected_version=req.expected_version,
                )
                if task.status != S.RUNNING:
                    start = Transition(
                        req.expected_version, f"{op_id}:start", S.RUNNING, current_step_id=req.step_id
                    )
                    version = move(session, req.ref, start).state_version
                operations.begin_operation(
                    session,
                    tenant_id=req.tenant_id,
                    task_id=req.task_id,
                    operation_id=op_id,
                    kind="publish",
                    idempotency_key=key,
                    destination=req.destination,
                    artifact_sha256=req.artifact_sha256,
                )
        if existing is not None:
            # A previous try began this operation and died: its outcome is unknown, so ask first.
            try:
                found = destination.lookup(req.operation_id)
            except DestinationUnavailable:
                return self._unknown(req, version, "the previous try's outcome cannot be looked up")
            if found is not None:
                return self._succeeded(req, version, found.publication_id, found.location)
        try:
            publication = destination.put_if_absent(
                key,
                req.operation_id,
                self._files(req, version),
                {"tenant_id": req.tenant_id, "task_id": req.task_id, "artifact_sha256": req.artifact_sha256},
            )
        except DestinationTimeout as exc:
            return self._unknown(req, version, str(exc))
        return self._succeeded(req, version, publication.publication_id, publication.location)

    def _files(self, req: PublishInput, version: int) -> dict[str, bytes]:
        """What the destination receives: the type's ``files`` hook's artifacts, else the approved artifact."""
        hook = registry.hook(req.task_type, req.step_id)
        if hook is None:
            with self._tx(req.tenant_id) as session:
                name = get_artifact(session, req.tenant_id, req.task_id, req.artifact_sha256).name
            return {name: read(self.artifacts, req.artifact_sha256)}
        step_input = RunStepInput(
            req.tenant_id, req.task_id, req.task_type, req.step_id, None, "v1", req.goal, {},
            {"artifact_sha256": req.artifact_sha256}, version,
        )
        return {a.name: a.content for a in hook(self._context(step_input)).artifacts}

    def _settle(self, req: Settled, status: str, change: Transition, **values: Any) -> int:
        """Record the operation's outcome and move the task, in one transaction; the new state_version."""
        with self._tx(req.tenant_id) as session:
            op = operations.update_operation(session, req.tenant_id, uuid.UUID(req.operation_id), status=status,
                                             **values)
            version = move(session, req.ref, change).state_version
            if status == "SUCCEEDED" and op.artifact_sha256 is not None:
                propose_from_task(session, self.artifacts, req.tenant_id, req.task_id, op.artifact_sha256,
                                  datetime.now(UTC))
            return version

    def _unknown(self, req: PublishInput, version: int, error: str) -> OperationResult:
        waiting = Transition(
            version,
            f"{req.operation_id}:unknown",
            S.WAITING_FOR_EXTERNAL,
            waiting_reason="UNKNOWN_OUTCOME",
            checkpoint_reason="unknown_outcome",
            pending_conditions=[{"type": "RECONCILE", "operation_id": req.operation_id}],
        )
        return OperationResult("UNKNOWN_OUTCOME", self._settle(req, "UNKNOWN_OUTCOME", waiting, error=error))

    def _succeeded(
        self, req: Settled, version: int, publication_id: str | None, location: str | None, **extra: Any
    ) -> OperationResult:
        published = Transition(
            version,
            f"{req.operation_id}:succeeded",
            S.SUCCEEDED,
            current_step_id=None,
            complete_step=req.step_id,
            facts=TransitionFacts(publication_confirmed=True),
            checkpoint_reason="published",
        )
        values = {"publication_id": publication_id, "location": location, "error": None, **extra}
        version = self._settle(req, "SUCCEEDED", published, **values)
        return OperationResult("SUCCEEDED", version, publication_id, location)

    def _absent(self, req: ReconcileInput | ResolveInput, suffix: str, reason: str, **values: Any) -> OperationResult:
        """Definitely not published: the task goes back to RUNNING for a new attempt."""
        back = Transition(req.expected_version, f"{req.operation_id}:{suffix}", S.RUNNING, checkpoint_reason=reason)
        return OperationResult("ABSENT", self._settle(req, "FAILED", back, **values))

    @activity.defn(name="task_reconcile")
    def reconcile(self, req: ReconcileInput) -> OperationResult:
        """Ask the destination, by operation id, what happened. Never sends anything."""
        destination = self._destination(req.tenant_id, req.destination)
        with self._tx(req.tenant_id) as session:
            op = operations.get_operation(session, req.tenant_id, uuid.UUID(req.operation_id), lock=True)
            task = get_task(session, req.tenant_id, req.task_id)
            if op.status != "UNKNOWN_OUTCOME":
                return _answer(op, task.state_version)
            op.reconcile_attempts += 1
        try:
            found = destination.lookup(req.operation_id)
        except DestinationUnavailable:
            return OperationResult("UNKNOWN_OUTCOME", req.expected_version)
        if found is not None:
            return self._succeeded(req, req.expected_version, found.publication_id, found.location)
        return self._absent(req, "absent", "reconciled_absent", error="reconciled: definitely not published")

    @activity.defn(name="task_resolve_operation")
    def resolve_operation(self, req: ResolveInput) -> OperationResult:
        """An operator's verdict on an operation nobody could reconcile."""
        with self._tx(req.tenant_id) as session:
            op = operations.get_operation(session, req.tenant_id, uuid.UUID(req.operation_id), lock=True)
            if op.status != "UNKNOWN_OUTCOME":
                return _answer(op, get_task(session, req.tenant_id, req.task_id).state_version)
        verdict = {"resolved_by": req.user_id, "resolution_note": req.note}
        if req.outcome != "published":
            return self._absent(req, "resolved", "operator_resolved", error="operator: not published", **verdict)
        found = None
        with suppress(DestinationUnavailable):  # the operator's word stands; the location is a courtesy
            found = self._destination(req.tenant_id, req.destination).lookup(req.operation_id)
        publication_id, location = (found.publication_id, found.location) if found else (None, None)
        return self._succeeded(req, req.expected_version, publication_id, location, **verdict)
