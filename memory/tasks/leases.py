"""Agent-performed steps (issue 26, item 2): an agent outside the worker claims a step under a lease, renews it,
and completes or fails it; the workflow opens the step and collects its outcome.

- The workflow opens the step (:func:`open_agent_step`): its step row is ``WAITING`` and the task
  ``WAITING_FOR_EXTERNAL`` with waiting reason ``AGENT``. It collects it (:func:`collect_agent_step`) when the API
  signals :data:`SETTLED_SIGNAL`, or on its own poll should that signal be lost.
- Every claim is an attempt row of :mod:`memory.tasks.steps` holding a lease. The database clock ``now()`` is the
  only clock: a lease is live while ``lease_expires_at > now()``. Claims of one step are serialised by a lock on
  its step row, so two agents never hold it at once; an expired lease is ``LEASE_EXPIRED`` and does not count
  towards :data:`~memory.tasks.steps.STEP_ATTEMPT_LIMIT` (an agent that died says nothing about the step).
- Completing records the step's result and artifacts but never moves the task: the workflow does, at its own
  ``state_version``, when it collects (the agent's call never races the workflow's writes).

The agent's calls take a :data:`~memory.tasks.attempts.Transaction`: a lease found expired is recorded as such
and committed before the call is refused; the workflow's calls take the activity's session.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import Conflict, NotFound
from memory.tasks import keys
from memory.tasks.artifacts import ArtifactMeta, add_artifacts
from memory.tasks.attempts import Transaction
from memory.tasks.models import Task, TaskArtifact, TaskAttempt, TaskStep
from memory.tasks.ref import TaskRef
from memory.tasks.states import TERMINAL, TaskStatus
from memory.tasks.steps import (
    fails_the_task,
    finish_attempt,
    of_step,
    record_step_failure,
    record_step_success,
    start_attempt,
)
from memory.tasks.transitions import Snapshot, Transition, get_task, move

LEASE_MIN, LEASE_MAX, LEASE_DEFAULT = 5, 3600, 300
"""Seconds a claim (and each heartbeat) holds the step for."""
WAITING_REASON = "AGENT"
SETTLED_SIGNAL = "agent_step_settled"
"""The workflow's signal, payload ``{"step_id", "input_version"}``: an agent completed or failed the step."""
AGENT_ARTIFACT_KIND = "agent"


@dataclass(frozen=True)
class Claimed:
    attempt: TaskAttempt
    """The new attempt's row."""
    lease_expires_at: datetime
    input: dict[str, Any]


@dataclass(frozen=True)
class Completed:
    attempt_id: uuid.UUID
    step_id: str
    input_version: str
    replayed: bool


@dataclass(frozen=True)
class Failed:
    attempt_id: uuid.UUID
    step_id: str
    input_version: str
    step_status: Literal["WAITING", "GAVE_UP"]
    replayed: bool


@dataclass(frozen=True)
class AgentOutcome:
    """What the workflow collects: the step's result, the agent's giving up, or nothing yet."""

    status: Literal["SUCCEEDED", "GAVE_UP", "WAITING"]
    state_version: int
    output: dict[str, Any] | None = None
    artifacts: list[dict[str, str]] = field(default_factory=list)
    """``{"step_id", "name", "media_type", "sha256"}`` of each artifact the completing attempt delivered."""
    error: dict[str, Any] | None = None
    """GAVE_UP: the last failure's ``{"code": "agent_failed", "message": <the agent's reason>, "retryable"}``."""


# --- the workflow's side -------------------------------------------------------------------------------------


def open_agent_step(
    session: Session, ref: TaskRef, *, step_id: str, input_version: str, extra: dict[str, Any], expected_version: int
) -> Snapshot:
    """Open the step for an agent and move the task to wait for one (a READY task, after an approval or a resume,
    runs again first). A retry after the commit changes nothing: the step row is kept as it is, and the task, whose
    last transition is this very one, is answered as it stands."""
    key = keys.step_key(ref.task_id, step_id, input_version)
    opened = f"{key}:open"
    task = get_task(session, ref.tenant_id, ref.task_id)
    if task.last_transition_id == opened:
        return Snapshot(task.state_version, task.status, task.error)
    if task.status == TaskStatus.READY.value:
        expected_version = move(session, ref, Transition(
            expected_version=expected_version, transition_id=f"{key}:running", target=TaskStatus.RUNNING,
            current_step_id=step_id, checkpoint_reason=f"running:{step_id}",
        )).state_version
    session.execute(
        insert(TaskStep)
        .values(tenant_id=ref.tenant_id, task_id=ref.task_id, step_id=step_id, input_version=input_version,
                idempotency_key=key, status="WAITING", attempts=0, input_extra=extra)
        .on_conflict_do_nothing()
    )
    return move(session, ref, Transition(
        expected_version=expected_version, transition_id=opened, target=TaskStatus.WAITING_FOR_EXTERNAL,
        current_step_id=step_id, waiting_reason=WAITING_REASON, checkpoint_reason=f"waiting_for_agent:{step_id}",
        pending_conditions=[{"type": WAITING_REASON, "step_id": step_id}],
    ))


def collect_agent_step(
    session: Session, ref: TaskRef, *, step_id: str, input_version: str, next_step_id: str | None,
    expected_version: int,
) -> AgentOutcome:
    """The step's outcome. SUCCEEDED also moves the task on to ``next_step_id`` (RUNNING, the step completed), as
    a compute step's success does; GAVE_UP leaves failing the task to the workflow, WAITING changes nothing."""
    step = _step(session, ref, step_id, input_version)
    if step.status == "SUCCEEDED" and step.output is not None:
        snapshot = move(session, ref, Transition(
            expected_version=expected_version, transition_id=f"{step.idempotency_key}:succeeded",
            target=TaskStatus.RUNNING, current_step_id=next_step_id, complete_step=step_id,
            checkpoint_reason=f"step_succeeded:{step_id}",
        ))
        return AgentOutcome("SUCCEEDED", snapshot.state_version, step.output["output"], step.output["artifacts"])
    version = get_task(session, ref.tenant_id, ref.task_id).state_version
    if step.status == "GAVE_UP":
        last = session.execute(
            select(TaskAttempt.error).where(*_rows(TaskAttempt, step), TaskAttempt.status == "FAILED")
            .order_by(TaskAttempt.attempt_number.desc()).limit(1)
        ).scalar_one()
        return AgentOutcome("GAVE_UP", version, error=last)
    return AgentOutcome("WAITING", version)


def abandon_agent_attempts(session: Session, ref: TaskRef, status: str) -> None:
    """The task ended (cancelled, failed) while agents held leases: their attempts are ABANDONED, so the timeline
    shows no attempt running on a closed task; their complete or fail is then a 409 ``task_closed``."""
    session.execute(
        update(TaskAttempt)
        .where(TaskAttempt.tenant_id == ref.tenant_id, TaskAttempt.task_id == ref.task_id,
               TaskAttempt.status == "RUNNING", TaskAttempt.actor.is_not(None))
        .values(status="ABANDONED", finished_at=func.now(),
                error={"code": "task_closed", "message": f"the task ended ({status}) while the agent worked"})
    )


# --- the agent's side ----------------------------------------------------------------------------------------


def claim(
    transaction: Transaction, ref: TaskRef, *, step_id: str | None, lease_seconds: int, actor: str, worker: str
) -> Claimed:
    """A new attempt of the step the task waits on, holding it for ``lease_seconds``. Refused while another
    attempt's lease is live (``step_claimed``), or when the task waits for no agent step (``no_step_ready``)."""
    with transaction() as session:
        task = get_task(session, ref.tenant_id, ref.task_id)
        step = _waiting_step(session, task, step_id)
        now = _now(session)
        running = list(session.execute(
            select(TaskAttempt).where(*_rows(TaskAttempt, step), TaskAttempt.status == "RUNNING").with_for_update()
        ).scalars())
        live = [(a.attempt_id, a.lease_expires_at) for a in running
                if a.lease_expires_at is not None and a.lease_expires_at > now]
        if live:
            holder, until = live[0]
            raise Conflict(
                f"step {step.step_id} is claimed by attempt {holder} until {until.isoformat()}; claim it again after "
                "that if it is not completed by then", code="step_claimed",
                details={"attempt_id": str(holder), "lease_expires_at": until.isoformat()})
        for expired in running:
            _expire(session, expired)
        attempt = start_attempt(
            session, tenant_id=ref.tenant_id, task_id=ref.task_id, step_id=step.step_id,
            input_version=step.input_version, idempotency_key=step.idempotency_key, temporal_attempt=0,
            input_digest=keys.digest({"goal": task.goal, "extra": step.input_extra, "step": step.idempotency_key}),
            worker=worker,
        )
        attempt.lease_seconds, attempt.actor = lease_seconds, actor
        attempt.lease_expires_at = until = now + timedelta(seconds=lease_seconds)
        session.flush()
        return Claimed(attempt, until, claim_input(session, task, step))


def heartbeat(transaction: Transaction, ref: TaskRef, attempt_id: uuid.UUID) -> datetime:
    """Renew a live lease by the seconds it was claimed for; the new ``lease_expires_at``."""
    with transaction() as session:
        _, attempt = _locked(session, ref, attempt_id)
        expired = _check_live(session, attempt)
        if not expired:
            assert attempt.lease_seconds is not None
            attempt.lease_expires_at = _now(session) + timedelta(seconds=attempt.lease_seconds)
            session.flush()
            return attempt.lease_expires_at
    raise _lease_expired(attempt)


def complete(
    transaction: Transaction, ref: TaskRef, attempt_id: uuid.UUID, *, body_digest: str,
    artifacts: list[ArtifactMeta], output: dict[str, Any],
) -> Completed:
    """Record the step's result: the attempt SUCCEEDED, its artifacts (bytes already stored) and the step's output.
    The same body again is a replay; another body for a finished attempt, or any after its lease ran out, a 409."""
    with transaction() as session:
        step, attempt = _locked(session, ref, attempt_id)
        if _replayed(attempt, "SUCCEEDED", body_digest):
            return Completed(attempt.attempt_id, step.step_id, step.input_version, replayed=True)
        expired = _check_live(session, attempt)
        if not expired:
            refs = [{"step_id": step.step_id, "name": a.name, "media_type": a.media_type, "sha256": a.sha256}
                    for a in artifacts]
            result = {"output": output, "artifacts": refs}
            digest = keys.digest(result)
            finish_attempt(session, ref.tenant_id, attempt.attempt_id, status="SUCCEEDED", output_digest=digest)
            attempt.completion_digest = body_digest
            add_artifacts(session, ref.tenant_id, ref.task_id, step.step_id, artifacts)
            record_step_success(session, ref.tenant_id, ref.task_id, step.step_id, step.input_version, result, digest)
            return Completed(attempt.attempt_id, step.step_id, step.input_version, replayed=False)
    raise _lease_expired(attempt)


def fail(
    transaction: Transaction, ref: TaskRef, attempt_id: uuid.UUID, *, reason: str, retryable: bool, body_digest: str
) -> Failed:
    """The agent could not do the step. Retryable: the step waits for the next claim, until its agents failed
    :data:`~memory.tasks.steps.STEP_ATTEMPT_LIMIT` times; not retryable (or at the limit): the step GAVE_UP."""
    with transaction() as session:
        step, attempt = _locked(session, ref, attempt_id)
        if _replayed(attempt, "FAILED", body_digest):
            return Failed(attempt.attempt_id, step.step_id, step.input_version, _settled(step.status), replayed=True)
        expired = _check_live(session, attempt)
        if not expired:
            error = {"code": "agent_failed", "message": reason, "retryable": retryable}
            finish_attempt(session, ref.tenant_id, attempt.attempt_id, status="FAILED", error=error)
            attempt.completion_digest = body_digest
            failures = record_step_failure(session, ref.tenant_id, ref.task_id, step.step_id, step.input_version)
            settled: Literal["WAITING", "GAVE_UP"] = \
                "GAVE_UP" if not retryable or fails_the_task(failures, outage=None) else "WAITING"
            session.execute(update(TaskStep).where(*_rows(TaskStep, step))
                            .values(status=settled, updated_at=func.now()))
            return Failed(attempt.attempt_id, step.step_id, step.input_version, settled, replayed=False)
    raise _lease_expired(attempt)


def claim_input(session: Session, task: Task, step: TaskStep) -> dict[str, Any]:
    """Everything the agent needs, without a second call: the goal, the task's artifacts so far (bytes at
    ``GET /tasks/{id}/artifacts/{sha256}``) and, after an approver's rejection, the reason given. Of an artifact a
    redraft made again (the same step and name), only the latest: an agent looking one up by name gets the current."""
    rows = session.execute(
        select(TaskArtifact).where(TaskArtifact.tenant_id == task.tenant_id, TaskArtifact.task_id == task.task_id)
        .order_by(TaskArtifact.created_at, TaskArtifact.sha256)
    ).scalars()
    latest = {(a.step_id, a.name): {"step_id": a.step_id, "name": a.name, "media_type": a.media_type,
                                    "sha256": a.sha256} for a in rows}
    body: dict[str, Any] = {"goal": task.goal, "artifacts": list(latest.values())}
    note = (step.input_extra or {}).get("reviewer_note")
    if note:
        body["rejection_reason"] = note
    return body


# --- the rows ------------------------------------------------------------------------------------------------


def _now(session: Session) -> datetime:
    """The database's clock, the only one leases are measured by."""
    now: datetime = session.execute(select(func.now())).scalar_one()
    return now


def _step(session: Session, ref: TaskRef, step_id: str, input_version: str, *, lock: bool = False) -> TaskStep:
    query = select(TaskStep).where(TaskStep.tenant_id == ref.tenant_id, TaskStep.task_id == ref.task_id,
                                   TaskStep.step_id == step_id, TaskStep.input_version == input_version)
    step = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if step is None:
        raise NotFound(f"step {step_id} ({input_version}) of task {ref.task_id} was never opened",
                       code="step_not_found")
    return step


def _rows(row: type[TaskStep] | type[TaskAttempt], step: TaskStep) -> list[ColumnElement[bool]]:
    """The step's own row, or its attempts."""
    return of_step(row, step.tenant_id, step.task_id, step.step_id, step.input_version)


def _waiting_step(session: Session, task: Task, step_id: str | None) -> TaskStep:
    """The step row the task waits on for an agent, locked: the lock serialises the claims of the step."""
    waiting = task.status == TaskStatus.WAITING_FOR_EXTERNAL.value and task.waiting_reason == WAITING_REASON
    if waiting and (step_id is None or step_id == task.current_step_id):
        step = session.execute(
            select(TaskStep).where(TaskStep.tenant_id == task.tenant_id, TaskStep.task_id == task.task_id,
                                   TaskStep.step_id == task.current_step_id, TaskStep.status == "WAITING")
            .order_by(TaskStep.updated_at.desc()).limit(1).with_for_update()
        ).scalar_one_or_none()
        if step is not None:
            return step
        raise Conflict(
            f"step {task.current_step_id} of task {task.task_id} was just completed (or given up) and the task is "
            "about to move on: read it again (GET /tasks/{id}) in a moment and claim the next agent step then",
            code="no_step_ready", details={"status": task.status, "current_step_id": task.current_step_id,
                                           "step_settled": True})
    asked = f"step {step_id}" if step_id else "a step"
    raise Conflict(
        f"task {task.task_id} is not waiting for an agent to perform {asked} (it is {task.status}"
        + (f" at step {task.current_step_id}" if task.current_step_id else "") + "); read it with GET /tasks/{id} "
        "and claim when it waits for an agent", code="no_step_ready",
        details={"status": task.status, "current_step_id": task.current_step_id})


def _locked(session: Session, ref: TaskRef, attempt_id: uuid.UUID) -> tuple[TaskStep, TaskAttempt]:
    """An agent's attempt of this task and its step row, locked after the task's row (the order a transition that
    ends the task takes them: task, then attempts), so a complete and a cancel are one after the other: a result
    lands before the cancel or is refused after it, never recorded on a task that has just ended."""
    get_task(session, ref.tenant_id, ref.task_id, lock=True)
    found = session.execute(
        select(TaskAttempt.step_id, TaskAttempt.input_version).where(
            TaskAttempt.tenant_id == ref.tenant_id, TaskAttempt.task_id == ref.task_id,
            TaskAttempt.attempt_id == attempt_id, TaskAttempt.actor.is_not(None))
    ).one_or_none()
    if found is None:
        raise NotFound(f"attempt {attempt_id} does not exist in task {ref.task_id}", code="attempt_not_found")
    step = _step(session, ref, found.step_id, found.input_version, lock=True)
    attempt = session.execute(
        select(TaskAttempt).where(TaskAttempt.tenant_id == ref.tenant_id, TaskAttempt.attempt_id == attempt_id)
        .with_for_update()
    ).scalar_one()
    return step, attempt


def _replayed(attempt: TaskAttempt, status: str, body_digest: str) -> bool:
    """Whether this call repeats the one that ended the attempt; a finished attempt refuses any other."""
    if attempt.status in ("RUNNING", "LEASE_EXPIRED"):
        return False
    if attempt.status == status and attempt.completion_digest == body_digest:
        return True
    raise _finished(attempt)


def _check_live(session: Session, attempt: TaskAttempt) -> bool:
    """Whether the attempt's lease ran out (then it is LEASE_EXPIRED, committed before the call is refused). A task
    that has ended (cancelled while its agent worked) takes no more results."""
    status = get_task(session, attempt.tenant_id, attempt.task_id).status
    if TaskStatus(status) in TERMINAL:
        raise Conflict(f"task {attempt.task_id} has ended ({status}): its steps take no more results",
                       code="task_closed", details={"status": status})
    if attempt.status == "RUNNING" and attempt.lease_expires_at is not None \
            and attempt.lease_expires_at > _now(session):
        return False
    if attempt.status == "RUNNING":
        _expire(session, attempt)
    elif attempt.status != "LEASE_EXPIRED":
        raise _finished(attempt)
    return True


def _finished(attempt: TaskAttempt) -> Conflict:
    error = attempt.error or {}
    if attempt.status == "ABANDONED" and error.get("code") == "task_closed":
        return Conflict(f"task {attempt.task_id} has ended: its steps take no more results ({error['message']})",
                        code="task_closed")
    ended = {"SUCCEEDED": "was completed", "FAILED": "was failed"}.get(attempt.status, "was abandoned")
    return Conflict(
        f"attempt {attempt.attempt_id} {ended} already; only the very call that ended it (the same body) is "
        "answered again. Read the task (GET /tasks/{id}) for what happens next", code="attempt_finished",
        details={"attempt_status": attempt.status})


def _expire(session: Session, attempt: TaskAttempt) -> None:
    session.execute(
        update(TaskAttempt)
        .where(TaskAttempt.tenant_id == attempt.tenant_id, TaskAttempt.attempt_id == attempt.attempt_id)
        .values(status="LEASE_EXPIRED", finished_at=attempt.lease_expires_at,
                error={"code": "lease_expired", "message": "no complete, fail or heartbeat before the lease ran out"})
    )


def _lease_expired(attempt: TaskAttempt) -> Conflict:
    expired_at = attempt.lease_expires_at.isoformat() if attempt.lease_expires_at else None
    return Conflict(
        f"the lease of attempt {attempt.attempt_id} ran out at {expired_at}: its result is not taken; claim the "
        "step again (POST /tasks/{id}/attempts) and redo it", code="lease_expired",
        details={"lease_expires_at": expired_at})


def _settled(status: str) -> Literal["WAITING", "GAVE_UP"]:
    """A step after a failed attempt: waiting for the next claim (or its result), or given up."""
    return "GAVE_UP" if status == "GAVE_UP" else "WAITING"
