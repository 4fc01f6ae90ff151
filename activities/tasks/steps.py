"""Creating a task, running its compute and llm steps, and the workflow's own transitions (pause, cancel, fail)."""

from __future__ import annotations

import logging
import socket

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.db import heartbeating
from activities.tasks.base import TaskActivitiesBase
from activities.tasks.faults import connect_to_closed_port, stall
from activities.tasks.payloads import CreateTaskInput, RunStepInput, RunStepResult, TransitionInput
from activities.tasks.step_recall import step_bundle
from memory.artifact_store import read
from memory.tasks import approvals, keys, leases, registry, steps
from memory.tasks.artifacts import ArtifactMeta, step_artifacts
from memory.tasks.attempts import Performed, StepGaveUp, StepRun, run_attempt
from memory.tasks.contract import StepFailed
from memory.tasks.llm_steps import LlmAnswerInvalid, placeholders, run_llm_step
from memory.tasks.states import TERMINAL, TaskStatus
from memory.tasks.transitions import NewTask, Snapshot, Transition, get_task, insert_task, move

S = TaskStatus
log = logging.getLogger(__name__)


def _beat_every() -> float:
    """A third of the activity's heartbeat timeout (at most 5 s): two beats may be late before it runs out."""
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    return min(5.0, timeout.total_seconds() / 3) if timeout else 5.0


def _unexpected(step_id: str, attempts: int, exc: Exception) -> ApplicationError:
    """The step's last failure: its exception's text may hold SQL or content, so only its type is named."""
    return ApplicationError(
        f"the {step_id} step failed {attempts} times ({type(exc).__name__}); the worker's log has the details",
        type="activity_failed",
        non_retryable=True,
    )


class StepActivities(TaskActivitiesBase):
    @activity.defn(name="task_create")
    def create_task(self, req: CreateTaskInput) -> Snapshot:
        """Insert the task (READY); a task that cannot run here (an unknown destination) fails at once, recorded."""
        problem = None
        unknown = [name for name in (req.destination, *req.destinations)
                   if name and self._find_destination(req.tenant_id, name) is None]
        if unknown:
            problem = {"code": "unknown_destination", "message": f"unknown publication destination {unknown[0]!r}"}
        with self._tx(req.tenant_id) as session:
            task = insert_task(
                session,
                NewTask(
                    ref=req.ref,
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
            if problem is None:
                return Snapshot(task.state_version, task.status, task.error)
            refused = Transition(
                1, f"create:{req.task_id}:refused", S.FAILED, error=problem, checkpoint_reason="unrecoverable_error"
            )
            return move(session, req.ref, refused)

    @activity.defn(name="task_run_step")
    def run_step(self, req: RunStepInput) -> RunStepResult:
        """Run a compute or llm step once per (task, step, input version); a retry after success returns the stored
        output.

        An unreachable database or artifact store is an outage, not a failure of the step: the attempt is retried
        (the workflow's step retry policy has no attempt limit) and does not count towards
        ``steps.STEP_ATTEMPT_LIMIT``, which only the step's own failures use up.
        """
        try:
            return self._run_step(req)
        except Exception as exc:
            outage = steps.outage_code(exc)
            if outage is not None:
                what = {steps.OUTAGE: "database", steps.LLM_OUTAGE: "LLM endpoint"}.get(outage, "artifact store")
                raise ApplicationError(
                    f"the {what} is unreachable during the {req.step_id} step; it is retried once the {what} is back",
                    type=outage,
                ) from exc
            if not isinstance(exc, ApplicationError) and activity.info().attempt >= steps.STEP_ATTEMPT_BACKSTOP:
                raise _unexpected(req.step_id, activity.info().attempt, exc) from exc
            raise

    def _run_step(self, req: RunStepInput) -> RunStepResult:
        attempt_number = activity.info().attempt
        function = req.function or registry.hook_name(req.task_type, req.step_id)
        if req.kind == "compute" and not registry.has_function(function):
            # Retried (no attempt is recorded): a worker that loaded the function takes the step.
            log.error("the step function %r of %s/%s is not loaded on this worker: load its module here too "
                      "(MNEMO_TASK_MODULES, mnemo worker --tasks)", function, req.task_type, req.step_id)
            raise ApplicationError(f"no step function {function!r} is loaded on this worker; every worker must "
                                   "load the same task modules (mnemo worker --tasks)", type="unknown_step")
        if attempt_number <= self.faults.unreachable_database.get(req.step_id, 0):
            connect_to_closed_port(self.engine)
        run = StepRun(
            ref=req.ref, step_id=req.step_id, next_step_id=req.next_step_id, input_version=req.input_version,
            expected_version=req.expected_version, goal=req.goal, inputs=req.inputs, extra=req.extra,
            temporal_attempt=attempt_number, worker=f"{socket.gethostname()}:{attempt_number}",
        )
        try:
            done = run_attempt(lambda: self._tx(req.tenant_id), run,
                               lambda: self._perform(req, function, attempt_number))
        except StepFailed as exc:
            raise ApplicationError(exc.message, type=exc.code, non_retryable=True) from exc
        except StepGaveUp as exc:
            if isinstance(exc.cause, LlmAnswerInvalid):
                raise ApplicationError(f"the model's answer to the {req.step_id} step was refused {exc.failures} "
                                       f"times: {exc.cause}", type="llm_answer_invalid",
                                       non_retryable=True) from exc.cause
            raise _unexpected(req.step_id, exc.failures, exc.cause) from exc.cause
        with self._tx(req.tenant_id) as session:
            produced = step_artifacts(session, req.tenant_id, req.task_id, req.step_id)
        return RunStepResult(done.output, done.state_version, done.replayed, produced)

    def _perform(self, req: RunStepInput, function: str, attempt_number: int) -> Performed:
        """The step itself (after the drills' stall and injected bug), its artifacts' bytes stored."""
        stall(self.faults.slow_steps.get(req.step_id, 0.0))
        if attempt_number <= self.faults.broken_steps.get(req.step_id, 0):
            raise RuntimeError(f"injected bug in {req.step_id}, attempt {attempt_number}")
        if req.kind == "llm":
            # The model may take longer than the heartbeat timeout: silent, the attempt would be run again (and the
            # model asked twice) while the first is still waiting for its answer.
            with heartbeating(_beat_every()):
                quoted = set(placeholders(str(req.spec["prompt"])))
                texts = {f"{step}/{name}": read(self.artifacts, sha).decode("utf-8", errors="replace")
                         for step, named in req.artifacts.items() for name, sha in named.items()
                         if f"artifacts.{step}/{name}" in quoted}
                outcome = run_llm_step(req.spec, self.llm, goal=req.goal, artifacts=texts,
                                       bundle=step_bundle(self.engine, req), review=req.extra)
        else:
            outcome = registry.function(function)(self._context(req, step_bundle(self.engine, req)))
        metas = []
        for produced in outcome.artifacts:
            sha = self.artifacts.put(produced.content)
            metas.append(ArtifactMeta(sha, produced.name, produced.kind, produced.media_type, len(produced.content)))
        return Performed(outcome.output, metas)

    @activity.defn(name="task_transition")
    def transition(self, req: TransitionInput) -> Snapshot:
        """Pause, resume, cancel or fail: a guarded transition with its checkpoint."""
        expected = req.expected_version
        if req.force_from_newer_version:
            with self._tx(req.tenant_id) as session:
                current = get_task(session, req.tenant_id, req.task_id)
                if current.last_transition_id == req.transition_id:  # this verdict already landed
                    return Snapshot(current.state_version, current.status, current.error)
                expected = max(expected, current.state_version)
        with self._tx(req.tenant_id) as session:
            if req.cancel_pending_approvals:
                approvals.cancel_pending(session, req.tenant_id, req.task_id)
            snapshot = move(
                session,
                req.ref,
                Transition(
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
            if S(req.target) in TERMINAL:  # after the move: the task's row first, as an agent's complete locks it
                leases.abandon_agent_attempts(session, req.ref, req.target)
            return snapshot
