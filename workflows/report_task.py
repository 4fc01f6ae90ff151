"""ReportTaskWorkflow (type ``ReportTask``, its first name): a task as a durable state machine, running the
definition body pinned in its input (none: the built-in ``monthly-report-v1``), never one read later.

The workflow is the live truth of a task; the Postgres read model follows it, written only by activities with
``state_version`` checks. Human decisions (approve/reject, pause/resume/cancel, resolve) arrive as Updates whose
validators refuse bad requests to the caller. Deterministic: time from ``workflow.now()``, ids from
``workflow.uuid4()``, no I/O here. Later changes go through ``workflow.patched`` and keep the recorded
histories of ``tests/tasks/test_replay.py`` and ``test_replay_generic.py`` replaying.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.tasks import TaskActivities
    from activities.tasks.payloads import (
        CollectAgentStepInput,
        CreateTaskInput,
        DecideInput,
        ExpireInput,
        OpenAgentStepInput,
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
    from memory.tasks import approvals, controls, operations
    from memory.tasks.builtin import MONTHLY_REPORT_V1
    from memory.tasks.definitions import Definition, StepSpec, from_body
    from memory.tasks.keys import workflow_id
    from memory.tasks.leases import SETTLED_SIGNAL
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
    from workflows.task_support import (
        DEFINITIONS_PATCH,
        DELIVERY_RETRY,
        MAX_REVISIONS,
        REMINDER_DELIVERY_PATCH,
        WRITE_OPTIONS,
        TaskFailed,
        judge,
        refuse,
        step_options,
    )
    from workflows.task_support import cause_code as _cause_code

S = TaskStatus
WORKFLOW_NAME = "ReportTask"


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
    destination: str | None = None
    """Overrides every publish step's own destination when given (``POST /tasks``' ``destination``)."""
    approval: ApprovalPolicy = ApprovalPolicy()
    reconcile: ReconcilePolicy = ReconcilePolicy()
    step_heartbeat_seconds: float = 30.0
    step_retry_max_interval_seconds: float = 10.0
    """The longest wait between attempts of a step (tests shorten it); outages retry without limit."""
    definition: dict[str, Any] | None = None
    """The definition's body, pinned when the task started; None: the built-in ``monthly-report-v1``."""
    agent_poll_seconds: float = 600.0
    """How often a task waiting for an agent reads its step should the API's signal be lost (hourly after a day)."""


@dataclass(frozen=True)
class DecisionResult:
    approval_id: str
    decision: str
    status: str
    state_version: int
    replayed: bool
__all__ = ["WORKFLOW_NAME", "ApprovalPolicy", "DecisionResult", "ReconcilePolicy", "ReportTaskInput",
           "ReportTaskWorkflow", "TaskFailed", "_cause_code"]


@workflow.defn(name=WORKFLOW_NAME)
class ReportTaskWorkflow:
    def __init__(self) -> None:
        self._state: TaskState | None = None
        self.definition: Definition = MONTHLY_REPORT_V1
        self.outputs: dict[str, dict[str, Any]] = {}
        self.artifacts: dict[str, dict[str, str]] = {}
        """Each producing step's artifacts: step id → name → sha256 (what ``artifact_from`` names)."""
        self._pinned = False
        """Started after definitions were pinned (:data:`DEFINITIONS_PATCH`): approvals bind by artifact name."""
        self._approving: StepSpec | None = None
        self._publishing = "publish_report"
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
        self._settled: set[tuple[str, str]] = set()
        """Agent steps (step id, input version) the API said were completed or failed since they were last read."""

    # --- helpers ------------------------------------------------------------------------------------

    @property
    def s(self) -> TaskState:
        assert self._state is not None
        return self._state

    def _set_status(self, status: S, waiting_reason: str | None = None) -> None:
        self.s.status = status.value
        self.s.waiting_reason = waiting_reason
        reason = search_attributes.WAITING_REASON
        workflow.upsert_search_attributes([
            search_attributes.STATUS.value_set(status.value),
            reason.value_set(waiting_reason) if waiting_reason else reason.value_unset(),
        ])

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
                self.s.tenant_id, self.s.task_id, self.s.state_version, str(workflow.uuid4()), target.value, reason,
                current_step_id=current_step_id, waiting_reason=waiting_reason, error=error,
                pending_conditions=pending or [], cancel_pending_approvals=cancel_pending_approvals,
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
        definition = MONTHLY_REPORT_V1 if inp.definition is None else from_body(inp.task_type, inp.definition)
        self.definition = definition
        info = workflow.info()
        self._state = TaskState(
            task_id=inp.task_id, tenant_id=inp.tenant_id, owner_user_id=inp.owner_user_id, task_type=inp.task_type,
            goal=inp.goal, workflow_id=workflow_id(inp.tenant_id, inp.task_id), workflow_version=definition.version,
        )
        self.inp = inp
        self._set_status(S.CREATED)
        self._pinned = workflow.patched(DEFINITIONS_PATCH)
        destinations = [self._destination_of(step) for step in definition.steps if step.kind == "publish"]
        try:
            snapshot = await workflow.execute_activity_method(
                TaskActivities.create_task,
                CreateTaskInput(
                    inp.tenant_id, inp.task_id, inp.owner_user_id, inp.task_type, inp.goal, inp.request_intent_id,
                    destinations[0] if destinations else "", info.workflow_id, info.run_id, definition.version,
                    destinations[1:],
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
        try:
            await self._run_steps()
        except TaskFailed as failure:
            async with self._lock:
                # Forced: an attempt that timed out may still have committed after the workflow gave up on it.
                error = {"code": failure.code, "message": failure.message}
                await self._transition(S.FAILED, "unrecoverable_error", error=error, force=True)
        return self.s

    async def _run_steps(self) -> None:
        """Every step in order, each by its kind; stops where the task ended (cancelled, expired, published)."""
        steps = self.definition.steps
        self.s.current_step_id = steps[0].step_id
        kinds: dict[str, Callable[[StepSpec, int], Awaitable[bool]]] = {
            "compute": self._compute_step, "llm": self._compute_step, "agent": self._agent_step,
            "approval": self._approval, "publish": self._publish,
        }
        for index, step in enumerate(steps):
            if not await self._boundary() or not await kinds[step.kind](step, index):
                return
            if self.s.status == S.SUCCEEDED.value:  # published: a task's result is final (states.py's guard)
                return
        if self._pinned and self.s.status != S.SUCCEEDED.value:
            raise TaskFailed("no_publication", f"the definition {self.definition.version} ends without publishing: "
                             "a task succeeds once a destination confirmed its result, so its last step is a publish")

    def _following(self, index: int) -> str | None:
        steps = self.definition.steps
        return steps[index + 1].step_id if index + 1 < len(steps) else None

    async def _compute_step(self, step: StepSpec, index: int) -> bool:
        """A compute or llm step: one activity on a worker."""
        await self._compute(step, self._following(index))
        return True

    async def _agent_step(self, step: StepSpec, index: int) -> bool:
        return await self._agent(step, self._following(index))

    async def _produce(self, step: StepSpec, index: int, input_version: str, extra: dict[str, Any]) -> bool:
        """Run a producing step again (after a rejection, with the reviewer's reason); False if the task ended."""
        if step.kind == "agent":
            return await self._agent(step, self._following(index), input_version, extra)
        await self._compute(step, self._following(index), input_version, extra)
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
        self, step: StepSpec, following: str | None, input_version: str = "v1", extra: dict[str, Any] | None = None
    ) -> None:
        step_id = step.step_id
        self.s.current_step_id = step_id
        if self.s.status != S.RUNNING.value:
            self._set_status(S.RUNNING)
        try:
            result = await workflow.execute_activity_method(
                TaskActivities.run_step,
                RunStepInput(
                    self.s.tenant_id, self.s.task_id, self.s.task_type, step_id, following, input_version,
                    self.s.goal, self.outputs, extra or {}, self.s.state_version, str(step.spec.get("function", "")),
                    self.artifacts, step.kind, dict(step.spec), self.s.owner_user_id,
                ),
                **step_options(self.inp.step_heartbeat_seconds, self.inp.step_retry_max_interval_seconds,
                               step.spec.get("timeout_seconds")),
            )
        except ActivityError as exc:
            raise TaskFailed(*_cause_code(exc)) from exc
        self._produced(step_id, following, result.output, result.artifacts, result.state_version)

    def _produced(self, step_id: str, following: str | None, output: dict[str, Any], artifacts: dict[str, str],
                  state_version: int) -> None:
        self.outputs[step_id] = output
        self.artifacts[step_id] = artifacts
        self.s.state_version = state_version
        if step_id not in self.s.completed_step_ids:
            self.s.completed_step_ids.append(step_id)
        self.s.current_step_id = following

    # --- agent-performed steps ----------------------------------------------------------------------

    async def _agent(
        self, step: StepSpec, following: str | None, input_version: str = "v1", extra: dict[str, Any] | None = None
    ) -> bool:
        """Open the step for an agent (its claims, leases and results are the API's: :mod:`memory.tasks.leases`)
        and wait until its result is recorded. Woken by :meth:`agent_step_settled`, or by its own poll should that
        signal be lost. False when the task was cancelled while it waited."""
        step_id, key = step.step_id, (step.step_id, input_version)
        self.s.current_step_id = step_id
        async with self._lock:
            snapshot = await workflow.execute_activity_method(
                TaskActivities.open_agent_step,
                OpenAgentStepInput(self.s.tenant_id, self.s.task_id, step_id, input_version, extra or {},
                                   self.s.state_version),
                **WRITE_OPTIONS,
            )
            self._apply(snapshot, "AGENT")
        opened = workflow.now()
        limit = step.spec.get("timeout_seconds")
        deadline = opened + timedelta(seconds=float(limit)) if limit is not None else None
        while True:
            poll = self.inp.agent_poll_seconds
            if workflow.now() - opened > timedelta(days=1):
                poll = max(poll, 3600.0)
            if deadline is not None:
                poll = min(poll, (deadline - workflow.now()).total_seconds())
            with contextlib.suppress(TimeoutError):  # the poll: read the step even without the signal
                await workflow.wait_condition(lambda: key in self._settled or self._cancel_requested,
                                              timeout=max(poll, 0.001))
            if self._cancel_requested:
                await self._cancel()
                return False
            self._settled.discard(key)
            async with self._lock:
                found = await workflow.execute_activity_method(
                    TaskActivities.collect_agent_step,
                    CollectAgentStepInput(self.s.tenant_id, self.s.task_id, step_id, input_version, following,
                                          self.s.state_version),
                    **WRITE_OPTIONS,
                )
                if found.status == "SUCCEEDED":
                    self._produced(step_id, following, found.output, found.artifacts, found.state_version)
                    self._set_status(S.RUNNING)
                    return True
            if found.status == "GAVE_UP":
                reason = (found.error or {}).get("message", "no reason given")
                raise TaskFailed("agent_step_failed", f"the agent performing the {step_id} step gave up: {reason}")
            if deadline is not None and workflow.now() >= deadline:
                raise TaskFailed("agent_step_timeout", f"no agent completed the {step_id} step within {limit} seconds "
                                 "(the definition's timeout_seconds)")

    @workflow.signal(name=SETTLED_SIGNAL)
    def agent_step_settled(self, settled: dict[str, Any]) -> None:
        """The API recorded an agent's complete or fail of a step: read it now rather than at the next poll."""
        self._settled.add((str(settled.get("step_id")), str(settled.get("input_version"))))

    # --- approval -----------------------------------------------------------------------------------

    async def _approval(self, step: StepSpec, index: int) -> bool:
        """Request approval of the step's artifact and wait; a rejection runs the steps from the redraft step again
        (with the reviewer's reason), then asks again."""
        policy = self.inp.approval
        redraft = self.definition.redraft_step
        assert redraft is not None  # a definition with an approval names one (memory.tasks.definitions)
        self._approving = step
        while True:
            self.s.draft_sha256 = self._bound_artifact(step, redraft)
            requested_at = workflow.now()
            deadline = requested_at + timedelta(seconds=policy.deadline_seconds)
            async with self._lock:
                if self.s.status == S.READY.value:  # resumed from a pause just before this step
                    await self._transition(S.RUNNING, "running")
                requested = await workflow.execute_activity_method(
                    TaskActivities.request_approval,
                    RequestApprovalInput(
                        self.s.tenant_id, self.s.task_id, self.s.task_type, self.s.goal, self.outputs,
                        self.s.draft_sha256, deadline.isoformat(), self.s.state_version, step.step_id,
                        str(step.spec.get("approval_type", "default")), self.definition.version,
                    ),
                    **WRITE_OPTIONS,
                )
                self.s.pending_approval = PendingApproval(requested.approval_id, self.s.draft_sha256,
                                                          requested.approval_type, requested.summary,
                                                          deadline.isoformat())
                self.s.current_step_id = step.step_id
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
            extra = {"revision": revision, "reviewer_note": last.get("reason")}
            first = self.definition.index(redraft)
            for again in range(first, index):
                if not await self._produce(self.definition.steps[again], again, f"r{revision}", extra):
                    return False
            self.s.draft_revision = revision

    def _bound_artifact(self, step: StepSpec, redraft: str) -> str:
        """The sha256 the approval binds: its ``artifact_from`` (runs from before that: the draft's own output)."""
        if not self._pinned:
            draft = self.outputs[redraft]
            self.s.draft_revision = int(draft.get("revision", 1))
            return str(draft["draft_sha256"])
        self.s.draft_revision = max(self.s.draft_revision, 1)
        source = step.artifact_from
        assert source is not None  # an approval names its artifact (memory.tasks.definitions)
        producer, name = source
        sha = self.artifacts.get(producer, {}).get(name)
        if sha is None:
            raise TaskFailed("missing_artifact", f"the {step.step_id} step approves {producer}/{name}, "
                             f"but the {producer} step produced no artifact named {name!r}")
        return sha

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
                judge(approvals.check_decision, self._state, request)  # again, now no other write is in flight
                pending, approving, redraft = self.s.pending_approval, self._approving, self.definition.redraft_step
                assert pending is not None and approving is not None and redraft is not None
                snapshot = await workflow.execute_activity_method(
                    TaskActivities.decide_approval,
                    DecideInput(
                        self.s.tenant_id, self.s.task_id, pending.approval_id, request.decision, request.user_id,
                        list(request.roles), request.reason, self.s.state_version, redraft, approving.step_id,
                        self._after(approving),
                    ),
                    **WRITE_OPTIONS,
                )
                self.s.decisions.append({
                    "approval_id": pending.approval_id, "decision": request.decision,
                    "artifact_sha256": request.artifact_sha256, "by": request.user_id, "reason": request.reason,
                    "at": workflow.now().isoformat(),
                })
                if request.decision == "approve":
                    self.s.completed_step_ids.append(approving.step_id)
                    self.s.current_step_id = self._after(approving)
                else:
                    self.s.current_step_id = redraft
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
        judge(approvals.check_decider, self._state, request)  # who may decide comes before any replay
        key = (request.decision, request.artifact_sha256, request.state_version)
        if approvals.is_replay(self._decided_by.get(key), request):
            return  # the caller's own decision, already recorded: the handler replays its result
        if self._deciding:
            raise refuse(
                "decision_in_progress", "another decision on this draft is being recorded; read the task again"
            )
        judge(approvals.check_decision, self._state, request)

    # --- publish ------------------------------------------------------------------------------------

    def _destination_of(self, step: StepSpec) -> str:
        """The task's own destination (given at ``POST /tasks``) overrides the step's."""
        return self.inp.destination if self.inp.destination is not None else str(step.spec["destination"])

    def _after(self, step: StepSpec) -> str | None:
        return self._following(self.definition.index(step.step_id))

    def _approved(self, step: StepSpec) -> str:
        """The approval the publish step sends under: the last one, which bound the artifact it publishes."""
        if not self.s.decisions:
            raise TaskFailed("publish_without_approval", f"the {step.step_id} step publishes only an approved "
                             "artifact: the definition needs an approval step before it")
        source = step.artifact_from
        if source is not None and self.artifacts.get(source[0], {}).get(source[1]) != self.s.draft_sha256:
            raise TaskFailed("unapproved_artifact", f"the {step.step_id} step would publish {'/'.join(source)}, "
                             "which is not the artifact the last approval bound")
        return str(self.s.decisions[-1]["approval_id"])

    async def _publish(self, step: StepSpec, index: int) -> bool:
        """Publish the approved artifact exactly once; an unknown outcome is reconciled, never blindly retried.
        False when the task ended without it (cancelled)."""
        policy = self.inp.reconcile
        approval_id = self._approved(step)
        destination = self._destination_of(step)
        self._publishing = step.step_id
        for _attempt in range(policy.max_publish_attempts):
            if not controls.may_send_publication(cancel_requested=self._cancel_requested):
                return False
            operation = OperationRef(str(workflow.uuid4()), "publish", destination, "PENDING")
            self.s.operations.append(operation)
            if self.s.status != S.RUNNING.value:
                self._set_status(S.RUNNING)
            async with self._lock:
                try:
                    result = await workflow.execute_activity_method(
                        TaskActivities.publish,
                        PublishInput(
                            self.s.tenant_id, self.s.task_id, self.s.task_type, self.s.goal, operation.operation_id,
                            self.s.draft_sha256 or "", approval_id, destination, self.s.state_version, step.step_id,
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
            self.s.completed_step_ids.append(self._publishing)
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
                    ReconcileInput(self.s.tenant_id, self.s.task_id, operation.operation_id, operation.destination,
                                   self.s.state_version, self._publishing),
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
            judge(operations.check_resolve, self._state, request)
            operation = next(op for op in self.s.operations if op.operation_id == request.operation_id)
            result = await workflow.execute_activity_method(
                TaskActivities.resolve_operation,
                ResolveInput(
                    self.s.tenant_id, self.s.task_id, operation.operation_id, operation.destination, request.outcome,
                    request.user_id, request.note, self.s.state_version, self._publishing,
                ),
                **WRITE_OPTIONS,
            )
            self._record(operation, result)
            self._resolution = result.status
            return operation

    @resolve_operation.validator
    def validate_resolve(self, request: ResolveRequest) -> None:
        judge(operations.check_resolve, self._state, request)

    # --- pause, resume, cancel ----------------------------------------------------------------------

    @workflow.update
    def pause(self, request: ControlRequest) -> TaskState:
        self.s.pause_requested = True
        return self.s

    @pause.validator
    def validate_pause(self, request: ControlRequest) -> None:
        judge(controls.check_pause, self._state, request)

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
        judge(controls.check_resume, self._state, request)

    @workflow.update
    async def cancel(self, request: ControlRequest) -> TaskState:
        self._cancel_requested = True
        await workflow.wait_condition(lambda: self.s.status in {s.value for s in TERMINAL})
        return self.s

    @cancel.validator
    def validate_cancel(self, request: ControlRequest) -> None:
        judge(controls.check_cancel, self._state, request)

    @workflow.query
    def state(self) -> TaskState | None:
        return self._state
