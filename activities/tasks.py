"""Activities of the report task engine: every read-model write and every side effect.

Each activity is one or two tenant-scoped transactions guarded by ``state_version``.
Transition ids are derived from business keys (or passed in from the workflow),
so an activity retried after it committed recognises its own write instead of
repeating it. Business failures are non-retryable ``ApplicationError``s whose
``type`` is the machine code.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, func, select
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.report.definitions import DEFINITIONS
from activities.report.registry import StepContext, StepFailed, implementation
from activities.stores import (
    ArtifactStore,
    DestinationTimeout,
    DestinationUnavailable,
    PublicationDestination,
    default_destinations,
)
from memory.auth import key_is_active
from memory.db import is_connection_failure, tenant_session
from memory.enums import Role
from memory.errors import MnemoError
from memory.models import ApiKey
from memory.tasks import keys, store
from memory.tasks.states import TaskStatus, TransitionFacts

S = TaskStatus


@dataclass(frozen=True)
class FaultPlan:
    """Fault injection for tests and demos.

    ``slow_steps``: steps that stall (heartbeating) before they run. ``unreachable_database``: the
    first N attempts of a step find the database refusing connections (a real connection to a
    closed port, the error an outage raises). ``broken_steps``: the first N attempts of a step raise
    an unexpected exception, as a bug would.
    """

    slow_steps: dict[str, float] = field(default_factory=dict)
    unreachable_database: dict[str, int] = field(default_factory=dict)
    broken_steps: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> FaultPlan:
        """``MNEMO_TASK_SLOW_STEPS=generate_charts=30,load_data=5`` (seconds), for crash drills."""
        slow: dict[str, float] = {}
        for item in filter(None, os.environ.get("MNEMO_TASK_SLOW_STEPS", "").split(",")):
            step, _, seconds = item.partition("=")
            slow[step.strip()] = float(seconds)
        return cls(slow_steps=slow)


@dataclass(frozen=True)
class Snapshot:
    state_version: int
    status: str
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class CreateTaskInput:
    tenant_id: str
    task_id: str
    owner_user_id: str
    task_type: str
    goal: dict[str, Any]
    request_intent_id: str
    destination: str
    workflow_id: str
    run_id: str
    workflow_version: str


@dataclass(frozen=True)
class RunStepInput:
    tenant_id: str
    task_id: str
    task_type: str
    step_id: str
    next_step_id: str | None
    input_version: str
    goal: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    extra: dict[str, Any]
    expected_version: int


@dataclass(frozen=True)
class RunStepResult:
    output: dict[str, Any]
    state_version: int
    replayed: bool


@dataclass(frozen=True)
class TransitionInput:
    tenant_id: str
    task_id: str
    expected_version: int
    transition_id: str
    target: str
    checkpoint_reason: str
    current_step_id: str | None = store.KEEP
    waiting_reason: str | None = None
    error: dict[str, Any] | None = None
    pending_conditions: list[dict[str, Any]] = field(default_factory=list)
    cancel_pending_approvals: bool = False
    force_from_newer_version: bool = False
    """For the workflow's own failure verdict only: apply it even if a late attempt moved the
    read model past ``expected_version`` (the status machine still guards the edge)."""


@dataclass(frozen=True)
class RequestApprovalInput:
    tenant_id: str
    task_id: str
    task_type: str
    goal: dict[str, Any]
    inputs: dict[str, dict[str, Any]]
    draft_sha256: str
    deadline_at: str
    """ISO 8601, with a time zone."""
    expected_version: int


@dataclass(frozen=True)
class ApprovalRequested:
    approval_id: str
    approval_type: str
    summary: str
    state_version: int


@dataclass(frozen=True)
class DecideInput:
    tenant_id: str
    task_id: str
    approval_id: str
    decision: str
    user_id: str
    roles: list[str]
    reason: str | None
    expected_version: int
    redraft_step: str


@dataclass(frozen=True)
class ReminderInput:
    tenant_id: str
    approval_id: str
    number: int


@dataclass(frozen=True)
class ExpireInput:
    tenant_id: str
    task_id: str
    approval_id: str
    expected_version: int


@dataclass(frozen=True)
class PublishInput:
    tenant_id: str
    task_id: str
    task_type: str
    goal: dict[str, Any]
    operation_id: str
    artifact_sha256: str
    approval_id: str
    destination: str
    expected_version: int


@dataclass(frozen=True)
class OperationResult:
    """``status``: SUCCEEDED, UNKNOWN_OUTCOME, ABSENT (definitely not there) or FAILED."""

    status: str
    state_version: int
    publication_id: str | None = None
    location: str | None = None


@dataclass(frozen=True)
class ReconcileInput:
    tenant_id: str
    task_id: str
    operation_id: str
    destination: str
    expected_version: int


@dataclass(frozen=True)
class ResolveInput:
    tenant_id: str
    task_id: str
    operation_id: str
    destination: str
    outcome: str
    user_id: str
    note: str
    expected_version: int


def _fail(exc: MnemoError) -> ApplicationError:
    return ApplicationError(exc.message, exc.details, type=exc.code, non_retryable=True)


class TaskActivities:
    """Holds the engine, the artifact store and the publication destinations."""

    def __init__(
        self,
        engine: Engine,
        data_dir: Path,
        *,
        destinations: dict[str, PublicationDestination] | None = None,
        faults: FaultPlan | None = None,
    ) -> None:
        self.engine = engine
        self.artifacts = ArtifactStore(data_dir / "artifacts")
        self.destinations = destinations if destinations is not None else default_destinations(data_dir)
        self.faults = faults or FaultPlan.from_env()

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.create_task,
            self.run_step,
            self.transition,
            self.request_approval,
            self.decide_approval,
            self.remind_approval,
            self.expire_approval,
            self.publish,
            self.reconcile,
            self.resolve_operation,
        ]

    @contextmanager
    def _tx(self, tenant_id: str) -> Iterator[Session]:
        with _db(self.engine, tenant_id) as session:
            yield session


    def _destination(self, name: str) -> PublicationDestination:
        try:
            return self.destinations[name]
        except KeyError:
            raise ApplicationError(
                f"unknown publication destination {name!r}", type="unknown_destination", non_retryable=True
            ) from None

    # --- creation and steps ---------------------------------------------------------------------

    @activity.defn(name="task_create")
    def create_task(self, req: CreateTaskInput) -> Snapshot:
        """Insert the task (READY); a task that cannot run here (unknown destination) fails at once, recorded."""
        problem = None
        if req.task_type not in DEFINITIONS:
            problem = {"code": "unknown_task_type", "message": f"unknown task type {req.task_type!r}"}
        elif req.destination not in self.destinations:
            problem = {"code": "unknown_destination", "message": f"unknown publication destination {req.destination!r}"}
        with self._tx(req.tenant_id) as session:
            task = store.insert_task(
                session,
                store.NewTask(
                    tenant_id=req.tenant_id,
                    task_id=req.task_id,
                    owner_user_id=req.owner_user_id,
                    task_type=req.task_type,
                    goal=req.goal,
                    request_intent_id=req.request_intent_id,
                    create_key=keys.create_key(req.tenant_id, req.owner_user_id, req.request_intent_id),
                    destination=req.destination,
                    workflow_id=req.workflow_id,
                    run_id=req.run_id,
                    workflow_version=req.workflow_version,
                    transition_id=f"create:{req.task_id}",
                ),
            )
            if problem is not None:
                task = store.apply_transition(
                    session,
                    req.tenant_id,
                    req.task_id,
                    store.Transition(1, f"create:{req.task_id}:refused", S.FAILED, error=problem, checkpoint_reason="unrecoverable_error"),
                )
            return Snapshot(task.state_version, task.status, task.error)

    def _context(self, req: RunStepInput) -> StepContext:
        return StepContext(
            tenant_id=req.tenant_id,
            task_id=req.task_id,
            task_type=req.task_type,
            goal=req.goal,
            input_version=req.input_version,
            inputs=req.inputs,
            extra=req.extra,
            session=lambda: _db(self.engine, req.tenant_id),
            read_artifact=self.artifacts.get,
            heartbeat=_heartbeat,
        )

    @activity.defn(name="task_run_step")
    def run_step(self, req: RunStepInput) -> RunStepResult:
        """Run a compute step once per (task, step, input version); a retry after success returns the stored output.

        An unreachable database is an outage, not a failure of the step: the attempt is retried
        (the workflow's step retry policy has no attempt limit) and does not count towards
        ``store.STEP_ATTEMPT_LIMIT``, which only the step's own failures use up.
        """
        try:
            return self._run_step(req)
        except Exception as exc:
            if is_connection_failure(exc):
                raise ApplicationError(
                    f"the database is unreachable during the {req.step_id} step; it is retried once the database is back",
                    type="database_unavailable",
                ) from exc
            if not isinstance(exc, ApplicationError) and activity.info().attempt >= store.STEP_ATTEMPT_BACKSTOP:
                raise _unexpected(req.step_id, activity.info().attempt, exc) from exc
            raise

    def _run_step(self, req: RunStepInput) -> RunStepResult:
        key = keys.step_key(req.task_id, req.step_id, req.input_version)
        attempt_number = activity.info().attempt
        if attempt_number <= self.faults.unreachable_database.get(req.step_id, 0):
            _connect_to_closed_port(self.engine)
        with self._tx(req.tenant_id) as session:
            done = store.succeeded_step(session, req.tenant_id, key)
            if done is not None and done.output is not None:
                task = store.get_task(session, req.tenant_id, req.task_id)
                return RunStepResult(done.output, task.state_version, replayed=True)
            attempt = store.start_attempt(
                session,
                tenant_id=req.tenant_id,
                task_id=req.task_id,
                step_id=req.step_id,
                input_version=req.input_version,
                idempotency_key=key,
                temporal_attempt=activity.info().attempt,
                input_digest=keys.digest({"goal": req.goal, "inputs": req.inputs, "extra": req.extra, "step": key}),
                worker=f"{socket.gethostname()}:{activity.info().attempt}",
            )
        try:
            _stall(self.faults.slow_steps.get(req.step_id, 0.0))
            if attempt_number <= self.faults.broken_steps.get(req.step_id, 0):
                raise RuntimeError(f"injected bug in {req.step_id}, attempt {attempt_number}")
            outcome = implementation(req.task_type, req.step_id)(self._context(req))
            metas = []
            for produced in outcome.artifacts:
                sha = self.artifacts.put(produced.content)
                metas.append(store.ArtifactMeta(sha, produced.name, produced.kind, produced.media_type, len(produced.content)))
        except Exception as exc:
            outage = is_connection_failure(exc)
            code = exc.code if isinstance(exc, StepFailed) else store.OUTAGE if outage else type(exc).__name__
            with _db(self.engine, req.tenant_id) as session:  # during an outage this raises too: retried
                store.finish_attempt(session, req.tenant_id, attempt.attempt_id, status="FAILED", error={"code": code, "message": str(exc)})
                failures = store.record_step_failure(session, req.tenant_id, req.task_id, req.step_id, req.input_version)
            if isinstance(exc, StepFailed):
                raise ApplicationError(exc.message, type=exc.code, non_retryable=True) from exc
            if not outage and failures >= store.STEP_ATTEMPT_LIMIT:
                raise _unexpected(req.step_id, failures, exc) from exc
            raise
        output_digest = keys.digest(outcome.output)
        with self._tx(req.tenant_id) as session:
            store.finish_attempt(session, req.tenant_id, attempt.attempt_id, status="SUCCEEDED", output_digest=output_digest)
            store.add_artifacts(session, req.tenant_id, req.task_id, req.step_id, metas)
            store.record_step_success(
                session, req.tenant_id, req.task_id, req.step_id, req.input_version, outcome.output, output_digest
            )
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(
                    expected_version=req.expected_version,
                    transition_id=f"{key}:succeeded",
                    target=S.RUNNING,
                    current_step_id=req.next_step_id,
                    complete_step=req.step_id,
                    checkpoint_reason=f"step_succeeded:{req.step_id}",
                ),
            )
            return RunStepResult(outcome.output, task.state_version, replayed=False)

    @activity.defn(name="task_transition")
    def transition(self, req: TransitionInput) -> Snapshot:
        """Pause, resume, cancel or fail: a guarded transition with its checkpoint."""
        expected = req.expected_version
        if req.force_from_newer_version:
            with self._tx(req.tenant_id) as session:
                current = store.get_task(session, req.tenant_id, req.task_id)
                if current.last_transition_id == req.transition_id:  # this verdict already landed
                    return Snapshot(current.state_version, current.status, current.error)
                expected = max(expected, current.state_version)
        with self._tx(req.tenant_id) as session:
            if req.cancel_pending_approvals:
                pending = store.pending_approval(session, req.tenant_id, req.task_id)
                if pending is not None:
                    pending.status = "CANCELLED"
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(
                    expected_version=expected,
                    transition_id=req.transition_id,
                    target=S(req.target),
                    current_step_id=req.current_step_id,
                    waiting_reason=req.waiting_reason,
                    error=req.error,
                    checkpoint_reason=req.checkpoint_reason,
                    pending_conditions=req.pending_conditions,
                ),
            )
            return Snapshot(task.state_version, task.status, task.error)

    # --- approvals ------------------------------------------------------------------------------

    @activity.defn(name="task_request_approval")
    def request_approval(self, req: RequestApprovalInput) -> ApprovalRequested:
        """Create the approval request bound to the draft's hash, and wait (RUNNING → WAITING_FOR_APPROVAL)."""
        step_input = RunStepInput(
            req.tenant_id, req.task_id, req.task_type, "request_approval", None, "v1", req.goal, req.inputs, {},
            req.expected_version,
        )
        request = implementation(req.task_type, "request_approval")(self._context(step_input)).output
        approval_type = str(request["approval_type"])
        key = keys.approval_key(req.task_id, req.draft_sha256, approval_type)
        with self._tx(req.tenant_id) as session:
            store.get_artifact(session, req.tenant_id, req.task_id, req.draft_sha256)  # a valid, stored draft
            approval = store.request_approval(
                session,
                tenant_id=req.tenant_id,
                task_id=req.task_id,
                artifact_sha256=req.draft_sha256,
                approval_type=approval_type,
                idempotency_key=key,
                approval_id=uuid.uuid5(uuid.NAMESPACE_URL, key),
                state_version=req.expected_version + 1,
                deadline_at=datetime.fromisoformat(req.deadline_at),
            )
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(
                    expected_version=req.expected_version,
                    transition_id=f"{key}:requested",
                    target=S.WAITING_FOR_APPROVAL,
                    current_step_id="request_approval",
                    waiting_reason="APPROVAL",
                    draft_sha256=req.draft_sha256,
                    facts=TransitionFacts(draft_sha256=req.draft_sha256, approval_requested=True),
                    checkpoint_reason="waiting_for_approval",
                    pending_conditions=[
                        {
                            "type": "APPROVAL",
                            "approval_id": str(approval.approval_id),
                            "artifact_sha256": req.draft_sha256,
                            "deadline_at": req.deadline_at,
                        }
                    ],
                ),
            )
            return ApprovalRequested(str(approval.approval_id), approval_type, str(request["summary"]), task.state_version)

    @activity.defn(name="task_decide_approval")
    def decide_approval(self, req: DecideInput) -> Snapshot:
        """Record an approver's decision; approval → READY (publish), rejection → RUNNING (redraft)."""
        approved = req.decision == "approve"
        with self._tx(req.tenant_id) as session:
            approval = store.get_approval(session, req.tenant_id, uuid.UUID(req.approval_id), lock=True)
            task = store.get_task(session, req.tenant_id, req.task_id)
            if approval.status == "PENDING":
                approval.status = "APPROVED" if approved else "REJECTED"
                approval.decided_by = req.user_id
                approval.decided_roles = sorted(req.roles)
                approval.decided_at = func.now()
                approval.reason = req.reason
            has_role = bool({Role.APPROVER.value, Role.ADMIN.value} & set(req.roles))
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(
                    expected_version=req.expected_version,
                    transition_id=f"decision:{req.approval_id}",
                    target=S.READY if approved else S.RUNNING,
                    current_step_id="publish_report" if approved else req.redraft_step,
                    complete_step="request_approval" if approved else None,
                    facts=TransitionFacts(
                        draft_sha256=task.draft_sha256,
                        approval_status=approval.status,
                        approval_sha256=approval.artifact_sha256,
                        approver_has_role=has_role,
                        rejected=not approved,
                    ),
                    checkpoint_reason="approval_result",
                    pending_conditions=[{"type": "APPROVAL_RESULT", "approval_id": req.approval_id, "decision": approval.status}],
                ),
            )
            return Snapshot(task.state_version, task.status)

    @activity.defn(name="task_remind_approval")
    def remind_approval(self, req: ReminderInput) -> bool:
        """Send reminder ``number`` once (recorded; idempotent by approval and number)."""
        with self._tx(req.tenant_id) as session:
            approval = store.get_approval(session, req.tenant_id, uuid.UUID(req.approval_id))
            if approval.status != "PENDING":
                return False
            return store.record_reminder(session, req.tenant_id, approval.approval_id, req.number)

    @activity.defn(name="task_expire_approval")
    def expire_approval(self, req: ExpireInput) -> Snapshot:
        with self._tx(req.tenant_id) as session:
            approval = store.get_approval(session, req.tenant_id, uuid.UUID(req.approval_id), lock=True)
            if approval.status == "PENDING":
                approval.status = "EXPIRED"
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(
                    expected_version=req.expected_version,
                    transition_id=f"expire:{req.approval_id}",
                    target=S.FAILED,
                    error={"code": "approval_expired", "message": "nobody approved the draft before the deadline"},
                    checkpoint_reason="approval_expired",
                ),
            )
            return Snapshot(task.state_version, task.status)

    # --- publish: exactly once, with UNKNOWN_OUTCOME reconciliation ------------------------------

    def _recheck_before_publish(self, session: Session, req: PublishInput) -> None:
        """TOCTOU: permission, state_version, approval APPROVED and the artifact hash, re-read now."""
        task = store.get_task(session, req.tenant_id, req.task_id, lock=True)
        approval = store.get_approval(session, req.tenant_id, uuid.UUID(req.approval_id))
        problems = []
        if task.state_version != req.expected_version:
            problems.append(f"state_version is {task.state_version}, not {req.expected_version}")
        if approval.status != "APPROVED":
            problems.append(f"the approval is {approval.status}")
        if not (approval.artifact_sha256 == task.draft_sha256 == req.artifact_sha256):
            problems.append("the approved artifact is not the current draft")
        approver_keys = session.execute(
            select(ApiKey.roles).where(
                ApiKey.tenant_id == req.tenant_id, ApiKey.user_id == approval.decided_by, key_is_active()
            )
        ).scalars()
        if not any({Role.APPROVER.value, Role.ADMIN.value} & set(roles) for roles in approver_keys):
            problems.append(f"{approval.decided_by} no longer holds the approver role")
        owner_active = session.execute(
            select(ApiKey.key_id).where(
                ApiKey.tenant_id == req.tenant_id, ApiKey.user_id == task.owner_user_id, key_is_active()
            )
        ).first()
        if owner_active is None:
            problems.append(f"the task owner {task.owner_user_id} has no active credential")
        if problems:
            raise ApplicationError(
                "publishing refused: " + "; ".join(problems), {"problems": problems}, type="publish_refused", non_retryable=True
            )

    def _settle(self, session: Session, req: PublishInput | ReconcileInput | ResolveInput, status: str, **values: Any) -> Any:
        return store.update_operation(session, req.tenant_id, uuid.UUID(req.operation_id), status=status, **values)

    @activity.defn(name="task_publish")
    def publish(self, req: PublishInput) -> OperationResult:
        destination = self._destination(req.destination)
        key = keys.publish_key(req.task_id, req.artifact_sha256, req.destination)
        op_id = uuid.UUID(req.operation_id)
        with self._tx(req.tenant_id) as session:
            existing = session.get(store.TaskOperation, (req.tenant_id, op_id))
            task = store.get_task(session, req.tenant_id, req.task_id)
            if existing is not None and existing.status in ("SUCCEEDED", "UNKNOWN_OUTCOME", "FAILED"):
                return OperationResult(existing.status, task.state_version, existing.publication_id, existing.location)
            if existing is None:
                self._recheck_before_publish(session, req)
                if task.status != S.RUNNING:
                    task = store.apply_transition(
                        session,
                        req.tenant_id,
                        req.task_id,
                        store.Transition(req.expected_version, f"{op_id}:start", S.RUNNING, current_step_id="publish_report"),
                    )
                store.begin_operation(
                    session,
                    tenant_id=req.tenant_id,
                    task_id=req.task_id,
                    operation_id=op_id,
                    kind="publish",
                    idempotency_key=key,
                    destination=req.destination,
                    artifact_sha256=req.artifact_sha256,
                )
            version = task.state_version
        if existing is not None:
            # A previous try began this operation and died: its outcome is unknown, so ask first.
            try:
                found = destination.lookup(req.operation_id)
            except DestinationUnavailable:
                return self._unknown(req, version, "the previous try's outcome cannot be looked up")
            if found is not None:
                return self._succeeded(req, version, found.publication_id, found.location)
        step_input = RunStepInput(req.tenant_id, req.task_id, req.task_type, "publish_report", None, "v1", req.goal, {}, {"artifact_sha256": req.artifact_sha256}, version)
        files = {a.name: a.content for a in implementation(req.task_type, "publish_report")(self._context(step_input)).artifacts}
        try:
            publication = destination.put_if_absent(
                key,
                req.operation_id,
                files,
                {"tenant_id": req.tenant_id, "task_id": req.task_id, "artifact_sha256": req.artifact_sha256},
            )
        except DestinationTimeout as exc:
            return self._unknown(req, version, str(exc))
        return self._succeeded(req, version, publication.publication_id, publication.location)

    def _unknown(self, req: PublishInput, version: int, error: str) -> OperationResult:
        with self._tx(req.tenant_id) as session:
            self._settle(session, req, "UNKNOWN_OUTCOME", error=error)
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(
                    version,
                    f"{req.operation_id}:unknown",
                    S.WAITING_FOR_EXTERNAL,
                    waiting_reason="UNKNOWN_OUTCOME",
                    checkpoint_reason="unknown_outcome",
                    pending_conditions=[{"type": "RECONCILE", "operation_id": req.operation_id}],
                ),
            )
            return OperationResult("UNKNOWN_OUTCOME", task.state_version)

    def _succeeded(
        self, req: PublishInput | ReconcileInput | ResolveInput, version: int, publication_id: str | None, location: str | None, **extra: Any
    ) -> OperationResult:
        with self._tx(req.tenant_id) as session:
            self._settle(session, req, "SUCCEEDED", publication_id=publication_id, location=location, error=None, **extra)
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(
                    version,
                    f"{req.operation_id}:succeeded",
                    S.SUCCEEDED,
                    current_step_id=None,
                    complete_step="publish_report",
                    facts=TransitionFacts(publication_confirmed=True),
                    checkpoint_reason="published",
                ),
            )
            return OperationResult("SUCCEEDED", task.state_version, publication_id, location)

    @activity.defn(name="task_reconcile")
    def reconcile(self, req: ReconcileInput) -> OperationResult:
        """Ask the destination, by operation id, what happened. Never sends anything."""
        destination = self._destination(req.destination)
        with self._tx(req.tenant_id) as session:
            op = store.get_operation(session, req.tenant_id, uuid.UUID(req.operation_id), lock=True)
            task = store.get_task(session, req.tenant_id, req.task_id)
            if op.status != "UNKNOWN_OUTCOME":
                status = "ABSENT" if op.status == "FAILED" else op.status
                return OperationResult(status, task.state_version, op.publication_id, op.location)
            op.reconcile_attempts += 1
        try:
            found = destination.lookup(req.operation_id)
        except DestinationUnavailable:
            return OperationResult("UNKNOWN_OUTCOME", req.expected_version)
        if found is not None:
            return self._succeeded(req, req.expected_version, found.publication_id, found.location)
        with self._tx(req.tenant_id) as session:
            self._settle(session, req, "FAILED", error="reconciled: definitely not published")
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(req.expected_version, f"{req.operation_id}:absent", S.RUNNING, checkpoint_reason="reconciled_absent"),
            )
            return OperationResult("ABSENT", task.state_version)

    @activity.defn(name="task_resolve_operation")
    def resolve_operation(self, req: ResolveInput) -> OperationResult:
        """An operator's verdict on an operation nobody could reconcile."""
        with self._tx(req.tenant_id) as session:
            op = store.get_operation(session, req.tenant_id, uuid.UUID(req.operation_id), lock=True)
            if op.status != "UNKNOWN_OUTCOME":
                task = store.get_task(session, req.tenant_id, req.task_id)
                return OperationResult("ABSENT" if op.status == "FAILED" else op.status, task.state_version, op.publication_id, op.location)
        if req.outcome == "published":
            found = None
            try:
                found = self._destination(req.destination).lookup(req.operation_id)
            except DestinationUnavailable:
                pass
            return self._succeeded(
                req,
                req.expected_version,
                found.publication_id if found else None,
                found.location if found else None,
                resolved_by=req.user_id,
                resolution_note=req.note,
            )
        with self._tx(req.tenant_id) as session:
            self._settle(session, req, "FAILED", error="operator: not published", resolved_by=req.user_id, resolution_note=req.note)
            task = store.apply_transition(
                session,
                req.tenant_id,
                req.task_id,
                store.Transition(req.expected_version, f"{req.operation_id}:resolved", S.RUNNING, checkpoint_reason="operator_resolved"),
            )
            return OperationResult("ABSENT", task.state_version)


@contextmanager
def _db(engine: Engine, tenant_id: str) -> Iterator[Session]:
    """A tenant transaction that a cancellation cannot interrupt halfway.

    The SDK cancels a sync activity by raising inside its thread; landing in the
    middle of a database call, that corrupts the pooled connection (seen under
    load as "another command is already in progress"). Shielded, the exception
    arrives after the transaction has committed or rolled back.
    """
    shield = activity.shield_thread_cancel_exception() if activity.in_activity() else nullcontext()
    with shield:
        try:
            with tenant_session(engine, tenant_id) as session:
                yield session
        except MnemoError as exc:
            raise _fail(exc) from exc


def _heartbeat() -> None:
    if activity.in_activity():
        activity.heartbeat()


def _unexpected(step_id: str, attempts: int, exc: Exception) -> ApplicationError:
    """The step's last failure: its exception's text may hold SQL or content, so only its type is named."""
    return ApplicationError(
        f"the {step_id} step failed {attempts} times ({type(exc).__name__}); the worker's log has the details",
        type="activity_failed",
        non_retryable=True,
    )


def _connect_to_closed_port(engine: Engine) -> None:
    """Fault injection: connect to the database's host on a port nobody listens on (connection refused)."""
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = create_engine(engine.url.set(host="127.0.0.1", port=port), poolclass=NullPool)
    try:
        with dead.connect():
            pass
    finally:
        dead.dispose()


def _stall(seconds: float) -> None:
    """Fault injection: wait (heartbeating, so the worker looks alive) before running the step."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _heartbeat()
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
