"""ReportTaskWorkflow: a report task as a durable state machine (definition ``monthly-report-v1``).

The workflow is the live truth of a task; the Postgres read model follows it,
written only by activities with ``state_version`` checks. Human decisions
(approve/reject, pause/resume/cancel, resolve) arrive as Updates whose
validators refuse bad requests to the caller. Deterministic: time from
``workflow.now()``, ids from ``workflow.uuid4()``, no I/O here.

Later changes to this code must go through ``workflow.patched`` and keep
``tests/tasks/test_replay.py`` green on the recorded history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.tasks import TaskActivities
    from activities.tasks.payloads import (
        CreateTaskInput,
        DecideInput,
        ExpireInput,
        OperationResult,
        PublishInput,
        ReconcileInput,
        ReminderInput,
        RequestApprovalInput,
        ResolveInput,
        RunStepInput,
        TaskPayload,
        TransitionInput,
    )
    from memory.errors import MnemoError
    from memory.reports.definitions import DEFINITIONS, ReportDefinition
    from memory.tasks import approvals, controls, operations
    from memory.tasks.keys import workflow_id
    from memory.tasks.live import (
        ApprovalDecision,
        ControlRequest,
        OperationRef,
        PendingApproval,
        ResolveRequest,
        TaskState,
    )
    from memory.tasks.states import TERMINAL, TaskStatus
    from memory.tasks.transitions import KEEP, Snapshot
    from workflows import search_attributes

S = TaskStatus
WORKFLOW_NAME = "ReportTask"
MAX_REVISIONS = 5


@dataclass(frozen=True)
class ApprovalPolicy:
    deadline_seconds: float = 3 * 24 * 3600
    reminder_every_seconds: float = 24 * 3600


@dataclass(frozen=True)
class ReconcilePolicy:
    max_reconciles: int = 3
    interval_seconds: float = 2.0
    max_publish_attempts: int = 3


@dataclass(frozen=True)
class ReportTaskInput(TaskPayload):
    """The workflow's input (in every history: its JSON shape stays, the identity flat as in every payload)."""

    owner_user_id: str
    task_type: str
    goal: dict[str, Any]
    request_intent_id: str
    destination: str = "reports"
    approval: ApprovalPolicy = ApprovalPolicy()
    reconcile: ReconcilePolicy = ReconcilePolicy()
    step_heartbeat_seconds: float = 30.0
    step_retry_max_interval_seconds: float = 10.0
    """The longest wait between attempts of a step (tests shorten it); outages retry without limit."""


@dataclass(frozen=True)
class DecisionResult:
    approval_id: str
    decision: str
    status: str
    state_version: int
    replayed: bool


class TaskFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _refuse(code: str, message: str) -> ApplicationError:
    """A validator refusal: the caller gets ``code`` back; the workflow is untouched."""
    return ApplicationError(message, type=code, non_retryable=True)


R = TypeVar("R")


def _judge(rule: Callable[[TaskState | None, R], None], live: TaskState | None, request: R) -> None:
    """Apply a ``memory.tasks`` rule to the live state; its refusal goes back to the caller as its code."""
    try:
        rule(live, request)
    except MnemoError as refusal:
        raise _refuse(refusal.code, refusal.message) from None


def _cause_code(exc: ActivityError) -> tuple[str, str]:
    """The task's ``error`` for a failed activity. A refusal the activity raised on purpose (non-retryable)
    says what it means; anything else is an exception nobody expected, whose text may hold SQL, its
    parameters or content: the task names only its type (the worker's log has the traceback)."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        if cause.non_retryable:
            return cause.type or "activity_failed", cause.message
        return "activity_failed", (
            f"the {exc.activity_type or 'activity'} step failed unexpectedly ({cause.type or 'error'}) "
            "and ran out of retries; the worker's log has the details"
        )
    return "activity_failed", str(cause or exc)


WRITE_OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=60),
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=10),
}
REMINDER_DELIVERY_PATCH = "deliver-reminders-to-webhook"
"""Workflows that sent reminders before delivery existed replay without it (their history has no such activity)."""
DELIVERY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                             maximum_interval=timedelta(minutes=5))


@workflow.defn(name=WORKFLOW_NAME)
class ReportTaskWorkflow:
    def __init__(self) -> None:
        self._state: TaskState | None = None
        self.outputs: dict[str, dict[str, Any]] = {}
        self._lock = asyncio.Lock()
        self._deliveries: list[asyncio.Task[Any]] = []
        self._decided = False
        self._deciding = False
        self._cancel_requested = False
        self._resume_requested = False
        self._resolution: str | None = None
        self._decision_results: dict[tuple[str, str, int], DecisionResult] = {}
        self._decided_by: dict[tuple[str, str, int], str] = {}
        """Who recorded each decision: only they may replay it (:func:`memory.tasks.approvals.is_replay`)."""

    # --- helpers ------------------------------------------------------------------------------------

    @property
    def s(self) -> TaskState:
        assert self._state is not None
        return self._state

    def _set_status(self, status: S, waiting_reason: str | None = None) -> None:
        self.s.status = status.value
        self.s.waiting_reason = waiting_reason
        workflow.upsert_search_attributes(
            [
                search_attributes.STATUS.value_set(status.value),
                search_attributes.WAITING_REASON.value_set(waiting_reason)
                if waiting_reason
                else search_attributes.WAITING_REASON.value_unset(),
            ]
        )

    def _apply(self, snapshot: Snapshot, waiting_reason: str | None = None) -> None:
        self.s.state_version = snapshot.state_version
        self._set_status(S(snapshot.status), waiting_reason)

    async def _transition(
        self,
        target: S,
        reason: str,
        *,
        current_step_id: str | None = KEEP,
        waiting_reason: str | None = None,
        error: dict[str, Any] | None = None,
        pending: list[dict[str, Any]] | None = None,
        cancel_pending_approvals: bool = False,
        force: bool = False,
    ) -> None:
        snapshot = await workflow.execute_activity_method(
            TaskActivities.transition,
            TransitionInput(
                self.s.tenant_id,
                self.s.task_id,
                self.s.state_version,
                str(workflow.uuid4()),
                target.value,
                reason,
                current_step_id=current_step_id,
                waiting_reason=waiting_reason,
                error=error,
                pending_conditions=pending or [],
                cancel_pending_approvals=cancel_pending_approvals,
                force_from_newer_version=force,
            ),
            **WRITE_OPTIONS,
        )
        if current_step_id != KEEP:
            self.s.current_step_id = current_step_id
        if error is not None:
            self.s.error = error
        self._apply(snapshot, waiting_reason)

    # --- the run ------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: ReportTaskInput) -> TaskState:
        definition = DEFINITIONS[inp.task_type]
        info = workflow.info()
        self._state = TaskState(
            task_id=inp.task_id,
            tenant_id=inp.tenant_id,
            owner_user_id=inp.owner_user_id,
            task_type=inp.task_type,
            goal=inp.goal,
            workflow_id=workflow_id(inp.tenant_id, inp.task_id),
            workflow_version=definition.version,
        )
        self.inp = inp
        self._set_status(S.CREATED)
        try:
            snapshot = await workflow.execute_activity_method(
                TaskActivities.create_task,
                CreateTaskInput(
                    inp.tenant_id, inp.task_id, inp.owner_user_id, inp.task_type, inp.goal, inp.request_intent_id,
                    inp.destination, info.workflow_id, info.run_id, definition.version,
                ),
                **WRITE_OPTIONS,
            )
        except ActivityError as exc:
            code, message = _cause_code(exc)
            self.s.error = {"code": code, "message": message}
            self._set_status(S.FAILED)
            return self.s
        self.s.error = snapshot.error
        self._apply(snapshot)
        if snapshot.status == S.FAILED.value:
            return self.s
        steps = definition.steps
        self.s.current_step_id = steps[0].step_id
        try:
            for index, step in enumerate(steps):
                following = steps[index + 1].step_id if index + 1 < len(steps) else None
                if not await self._boundary():
                    return self.s
                if step.kind == "compute":
                    await self._compute(step.step_id, following)
                elif not await self._human_or_side_effect_step(step.kind, definition):
                    return self.s
        except TaskFailed as failure:
            async with self._lock:
                # Forced: an attempt that timed out may still have committed after the workflow gave up on it.
                error = {"code": failure.code, "message": failure.message}
                await self._transition(S.FAILED, "unrecoverable_error", error=error, force=True)
        return self.s

    async def _human_or_side_effect_step(self, kind: str, definition: ReportDefinition) -> bool:
        """An approval or a publish step. False when the task ended there."""
        if kind == "approval":
            return await self._approval(definition)
        if kind == "publish":
            return await self._publish()
        return True

    async def _boundary(self) -> bool:
        """Between steps: honour a cancel or a pause. False when the task ended here."""
        if self._cancel_requested:
            await self._cancel()
            return False
        if not self.s.pause_requested:
            return True
        async with self._lock:
            await self._transition(S.PAUSED, "paused", waiting_reason="PAUSED")
        self.s.pause_requested = False
        await workflow.wait_condition(lambda: self._resume_requested or self._cancel_requested)
        if self._cancel_requested:
            await self._cancel()
            return False
        self._resume_requested = False
        async with self._lock:
            await self._transition(S.READY, "resumed")
        return True

    async def _cancel(self) -> None:
        async with self._lock:
            self.s.pending_approval = None
            await self._transition(S.CANCELLED, "cancelled", cancel_pending_approvals=True)

    async def _compute(
        self, step_id: str, following: str | None, input_version: str = "v1", extra: dict[str, Any] | None = None
    ) -> None:
        self.s.current_step_id = step_id
        if self.s.status != S.RUNNING.value:
            self._set_status(S.RUNNING)
        try:
            result = await workflow.execute_activity_method(
                TaskActivities.run_step,
                RunStepInput(
                    self.s.tenant_id, self.s.task_id, self.s.task_type, step_id, following, input_version,
                    self.s.goal, self.outputs, extra or {}, self.s.state_version,
                ),
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=self.inp.step_heartbeat_seconds),
                # No attempt limit here: run_step fails for good after STEP_ATTEMPT_LIMIT failures of the
                # step itself, while attempts that met an unreachable database go on until it is back.
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=500),
                    maximum_interval=timedelta(seconds=max(0.5, self.inp.step_retry_max_interval_seconds)),
                    maximum_attempts=0,
                ),
            )
        except ActivityError as exc:
            raise TaskFailed(*_cause_code(exc)) from exc
        self.outputs[step_id] = result.output
        self.s.state_version = result.state_version
        if step_id not in self.s.completed_step_ids:
            self.s.completed_step_ids.append(step_id)
        self.s.current_step_id = following

    # --- approval -----------------------------------------------------------------------------------

    async def _approval(self, definition: ReportDefinition) -> bool:
        """Request approval of the current draft and wait; a rejection regenerates the draft."""
        policy = self.inp.approval
        while True:
            draft = self.outputs[definition.redraft_step]
            self.s.draft_sha256 = draft["draft_sha256"]
            self.s.draft_revision = int(draft.get("revision", 1))
            requested_at = workflow.now()
            deadline = requested_at + timedelta(seconds=policy.deadline_seconds)
            async with self._lock:
                if self.s.status == S.READY.value:  # resumed from a pause just before this step
                    await self._transition(S.RUNNING, "running")
                requested = await workflow.execute_activity_method(
                    TaskActivities.request_approval,
                    RequestApprovalInput(
                        self.s.tenant_id, self.s.task_id, self.s.task_type, self.s.goal, self.outputs,
                        self.s.draft_sha256, deadline.isoformat(), self.s.state_version,
                    ),
                    **WRITE_OPTIONS,
                )
                self.s.pending_approval = PendingApproval(
                    requested.approval_id,
                    self.s.draft_sha256,
                    requested.approval_type,
                    requested.summary,
                    deadline.isoformat(),
                )
                self.s.current_step_id = "request_approval"
                self._decided = False
                self.s.state_version = requested.state_version
                self._set_status(S.WAITING_FOR_APPROVAL, "APPROVAL")
            if not await self._await_decision(requested_at, deadline):
                return False
            last = self.s.decisions[-1]
            if last["decision"] == "approve":
                return True
            if self.s.draft_revision >= MAX_REVISIONS:
                raise TaskFailed("too_many_revisions", f"the draft was rejected {MAX_REVISIONS} times")
            revision = self.s.draft_revision + 1
            await self._compute(
                definition.redraft_step,
                "request_approval",
                input_version=f"r{revision}",
                extra={"revision": revision, "reviewer_note": last.get("reason")},
            )

    async def _await_decision(self, requested_at: Any, deadline: Any) -> bool:
        """Wait for a decision, sending reminders; False if the task was cancelled or the wait expired."""
        policy = self.inp.approval
        pending = self.s.pending_approval
        assert pending is not None
        while True:
            every = policy.reminder_every_seconds
            next_reminder = requested_at + timedelta(seconds=every * (pending.reminders_sent + 1))
            wake = min(next_reminder, deadline)
            try:
                await workflow.wait_condition(
                    lambda: self._decided or self._cancel_requested,
                    timeout=max((wake - workflow.now()).total_seconds(), 0.001),
                )
            except TimeoutError:
                if workflow.now() >= deadline:
                    async with self._lock:
                        if self._decided:
                            return True
                        snapshot = await workflow.execute_activity_method(
                            TaskActivities.expire_approval,
                            ExpireInput(self.s.tenant_id, self.s.task_id, pending.approval_id, self.s.state_version),
                            **WRITE_OPTIONS,
                        )
                        self.s.error = {
                            "code": "approval_expired",
                            "message": "nobody approved the draft before the deadline",
                        }
                        self.s.pending_approval = None
                        self._apply(snapshot)
                    return False
                number = pending.reminders_sent + 1
                reminder = ReminderInput(self.s.tenant_id, pending.approval_id, number)
                await workflow.execute_activity_method(TaskActivities.remind_approval, reminder, **WRITE_OPTIONS)
                pending.reminders_sent = number
                if workflow.patched(REMINDER_DELIVERY_PATCH):
                    self._deliver(reminder, max(every, 60.0))
                continue
            if self._decided:
                return True
            await self._cancel()
            return False

    def _deliver(self, reminder: ReminderInput, within_seconds: float) -> None:
        """Send the reminder to the tenant's webhook beside the wait (a slow receiver never delays a decision),
        retried until the next reminder is due; a failed delivery is the receiver's loss, never the task's."""
        delivery = workflow.start_activity_method(
            TaskActivities.deliver_reminder, reminder, start_to_close_timeout=timedelta(seconds=30),
            schedule_to_close_timeout=timedelta(seconds=within_seconds), retry_policy=DELIVERY_RETRY,
        )
        delivery.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._deliveries.append(delivery)

    @workflow.update
    async def decide(self, request: ApprovalDecision) -> DecisionResult:
        """Approve or reject the current draft (validated by :meth:`validate_decide`)."""
        key = (request.decision, request.artifact_sha256, request.state_version)
        if key in self._decision_results and approvals.is_replay(self._decided_by.get(key), request):
            first = self._decision_results[key]
            return DecisionResult(first.approval_id, first.decision, first.status, first.state_version, replayed=True)
        self._deciding = True
        try:
            async with self._lock:
                _judge(approvals.check_decision, self._state, request)  # again, now no other write is in flight
                pending = self.s.pending_approval
                assert pending is not None
                snapshot = await workflow.execute_activity_method(
                    TaskActivities.decide_approval,
                    DecideInput(
                        self.s.tenant_id, self.s.task_id, pending.approval_id, request.decision, request.user_id,
                        list(request.roles), request.reason, self.s.state_version,
                        DEFINITIONS[self.s.task_type].redraft_step,
                    ),
                    **WRITE_OPTIONS,
                )
                self.s.decisions.append(
                    {
                        "approval_id": pending.approval_id,
                        "decision": request.decision,
                        "artifact_sha256": request.artifact_sha256,
                        "by": request.user_id,
                        "reason": request.reason,
                        "at": workflow.now().isoformat(),
                    }
                )
                if request.decision == "approve":
                    self.s.completed_step_ids.append("request_approval")
                    self.s.current_step_id = "publish_report"
                else:
                    self.s.current_step_id = DEFINITIONS[self.s.task_type].redraft_step
                self.s.pending_approval = None
                self._apply(snapshot)
                result = DecisionResult(
                    pending.approval_id, request.decision, snapshot.status, snapshot.state_version, False
                )
                self._decision_results[key] = result
                self._decided_by[key] = request.user_id
                self._decided = True
                return result
        finally:
            self._deciding = False

    @decide.validator
    def validate_decide(self, request: ApprovalDecision) -> None:
        _judge(approvals.check_decider, self._state, request)  # who may decide comes before any replay
        key = (request.decision, request.artifact_sha256, request.state_version)
        if approvals.is_replay(self._decided_by.get(key), request):
            return  # the caller's own decision, already recorded: the handler replays its result
        if self._deciding:
            raise _refuse(
                "decision_in_progress", "another decision on this draft is being recorded; read the task again"
            )
        _judge(approvals.check_decision, self._state, request)

    # --- publish ------------------------------------------------------------------------------------

    async def _publish(self) -> bool:
        """Publish the approved draft exactly once; an unknown outcome is reconciled, never blindly retried."""
        policy = self.inp.reconcile
        approval_id = self.s.decisions[-1]["approval_id"]
        for _attempt in range(policy.max_publish_attempts):
            if not controls.may_send_publication(cancel_requested=self._cancel_requested):
                return False
            operation = OperationRef(str(workflow.uuid4()), "publish", self.inp.destination, "PENDING")
            self.s.operations.append(operation)
            if self.s.status != S.RUNNING.value:
                self._set_status(S.RUNNING)
            async with self._lock:
                try:
                    result = await workflow.execute_activity_method(
                        TaskActivities.publish,
                        PublishInput(
                            self.s.tenant_id, self.s.task_id, self.s.task_type, self.s.goal, operation.operation_id,
                            self.s.draft_sha256 or "", approval_id, self.inp.destination, self.s.state_version,
                        ),
                        **WRITE_OPTIONS,
                    )
                except ActivityError as exc:
                    operation.status = "FAILED"
                    raise TaskFailed(*_cause_code(exc)) from exc
            self._record(operation, result)
            if result.status == "SUCCEEDED":
                return True
            if result.status == "UNKNOWN_OUTCOME":
                outcome = await self._reconcile(operation)
                if outcome == "SUCCEEDED":
                    return True
                if outcome == "UNKNOWN_OUTCOME":
                    outcome = await self._wait_for_operator(operation)
                    if outcome == "CANCELLED":
                        return False
                    if outcome == "SUCCEEDED":
                        return True
            # ABSENT: the destination definitely has nothing; a new attempt with a new operation id.
        raise TaskFailed("publish_failed", f"publishing failed {policy.max_publish_attempts} times")

    def _record(self, operation: OperationRef, result: OperationResult) -> None:
        operation.status = "FAILED" if result.status == "ABSENT" else result.status
        operation.publication_id = result.publication_id
        operation.location = result.location
        self.s.state_version = result.state_version
        if result.status == "SUCCEEDED":
            self.s.completed_step_ids.append("publish_report")
            self.s.current_step_id = None
            self._set_status(S.SUCCEEDED)
        elif result.status == "UNKNOWN_OUTCOME":
            self._set_status(S.WAITING_FOR_EXTERNAL, "UNKNOWN_OUTCOME")
        elif result.status == "ABSENT":
            self._set_status(S.RUNNING)

    async def _reconcile(self, operation: OperationRef) -> str:
        policy = self.inp.reconcile
        for attempt in range(policy.max_reconciles):
            if attempt:
                await workflow.sleep(timedelta(seconds=policy.interval_seconds))
            async with self._lock:
                result = await workflow.execute_activity_method(
                    TaskActivities.reconcile,
                    ReconcileInput(
                        self.s.tenant_id,
                        self.s.task_id,
                        operation.operation_id,
                        operation.destination,
                        self.s.state_version,
                    ),
                    **WRITE_OPTIONS,
                )
            if result.status != "UNKNOWN_OUTCOME":
                self._record(operation, result)
                return result.status
        return "UNKNOWN_OUTCOME"

    async def _wait_for_operator(self, operation: OperationRef) -> str:
        async with self._lock:
            await self._transition(
                S.WAITING_FOR_OPERATOR,
                "waiting_for_operator",
                waiting_reason="OPERATOR",
                pending=[{"type": "OPERATOR", "operation_id": operation.operation_id}],
            )
        self._resolution = None
        await workflow.wait_condition(lambda: self._resolution is not None or self._cancel_requested)
        if self._resolution is None:
            await self._cancel()
            return "CANCELLED"
        return self._resolution

    @workflow.update
    async def resolve_operation(self, request: ResolveRequest) -> OperationRef:
        async with self._lock:
            _judge(operations.check_resolve, self._state, request)
            operation = next(op for op in self.s.operations if op.operation_id == request.operation_id)
            result = await workflow.execute_activity_method(
                TaskActivities.resolve_operation,
                ResolveInput(
                    self.s.tenant_id, self.s.task_id, operation.operation_id, operation.destination, request.outcome,
                    request.user_id, request.note, self.s.state_version,
                ),
                **WRITE_OPTIONS,
            )
            self._record(operation, result)
            self._resolution = result.status
            return operation

    @resolve_operation.validator
    def validate_resolve(self, request: ResolveRequest) -> None:
        _judge(operations.check_resolve, self._state, request)

    # --- pause, resume, cancel ----------------------------------------------------------------------

    @workflow.update
    def pause(self, request: ControlRequest) -> TaskState:
        self.s.pause_requested = True
        return self.s

    @pause.validator
    def validate_pause(self, request: ControlRequest) -> None:
        _judge(controls.check_pause, self._state, request)

    @workflow.update
    async def resume(self, request: ControlRequest) -> TaskState:
        if self.s.pause_requested:
            self.s.pause_requested = False
            return self.s
        self._resume_requested = True
        await workflow.wait_condition(lambda: self.s.status != S.PAUSED.value)
        return self.s

    @resume.validator
    def validate_resume(self, request: ControlRequest) -> None:
        _judge(controls.check_resume, self._state, request)

    @workflow.update
    async def cancel(self, request: ControlRequest) -> TaskState:
        self._cancel_requested = True
        await workflow.wait_condition(lambda: self.s.status in {s.value for s in TERMINAL})
        return self.s

    @cancel.validator
    def validate_cancel(self, request: ControlRequest) -> None:
        _judge(controls.check_cancel, self._state, request)

    @workflow.query
    def state(self) -> TaskState | None:
        return self._state
