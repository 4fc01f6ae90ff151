"""A task step's attempt logic called directly (no Temporal), against real PostgreSQL: the replay of a stored
success, the failure count that fails a task, and the outages that never do."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStoreUnavailable
from memory.db import tenant_session
from memory.tasks import transitions
from memory.tasks.artifacts import ArtifactMeta
from memory.tasks.attempts import Performed, StepGaveUp, StepRun, run_attempt
from memory.tasks.contract import StepFailed
from memory.tasks.models import TaskArtifact, TaskAttempt, TaskStep
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus
from memory.tasks.steps import STEP_ATTEMPT_LIMIT, STORE_OUTAGE
from tests.conftest import MakeKey


def _running_task(engine: Engine, make_key: MakeKey) -> TaskRef:
    """A RUNNING task at state_version 2, on its load_data step."""
    tenant, task_id = f"t-{uuid.uuid4().hex[:12]}", str(uuid.uuid4())
    make_key(tenant=tenant)
    ref = TaskRef(tenant, task_id)
    with tenant_session(engine, tenant) as session:
        transitions.insert_task(session, transitions.NewTask(
            ref=ref, owner_user_id="alice", task_type="monthly-report", goal={"month": "2026-06"},
            request_intent_id="i", create_key=f"create:{task_id}", destination="reports",
            workflow_id=f"task-{tenant}-{task_id}", run_id=None, workflow_version="monthly-report-v1",
            transition_id="t0",
        ))
        transitions.move(session, ref, transitions.Transition(1, "t1", TaskStatus.RUNNING, current_step_id="load_data"))
    return ref


def _run(ref: TaskRef, attempt: int = 1) -> StepRun:
    return StepRun(ref=ref, step_id="load_data", next_step_id="compute", input_version="v1", expected_version=2,
                   goal={"month": "2026-06"}, inputs={}, extra={}, temporal_attempt=attempt, worker="test")


def _tx(engine: Engine, ref: TaskRef) -> Callable[[], AbstractContextManager[Session]]:
    return lambda: tenant_session(engine, ref.tenant_id)


def _attempts(engine: Engine, ref: TaskRef) -> list[tuple[int, str, str | None]]:
    with tenant_session(engine, ref.tenant_id) as session:
        rows = session.execute(select(TaskAttempt).where(TaskAttempt.task_id == ref.task_id)
                               .order_by(TaskAttempt.attempt_number)).scalars()
        return [(r.attempt_number, r.status, (r.error or {}).get("code")) for r in rows]


def test_a_retry_after_success_returns_the_stored_output_without_running(engine: Engine, make_key: MakeKey) -> None:
    ref = _running_task(engine, make_key)
    meta = ArtifactMeta("a" * 64, "data.json", "data", "application/json", 2)
    first = run_attempt(_tx(engine, ref), _run(ref), lambda: Performed({"rows": 3}, [meta]))
    assert (first.output, first.state_version, first.replayed) == ({"rows": 3}, 3, False)

    def must_not_run() -> Performed:
        raise AssertionError("a step that succeeded ran again")

    again = run_attempt(_tx(engine, ref), _run(ref, attempt=2), must_not_run)
    assert (again.output, again.state_version, again.replayed) == ({"rows": 3}, 3, True)
    assert _attempts(engine, ref) == [(1, "SUCCEEDED", None)]  # the replay started no attempt
    with tenant_session(engine, ref.tenant_id) as session:
        task = transitions.get_task(session, ref.tenant_id, ref.task_id)
        assert (task.status, task.current_step_id) == ("RUNNING", "compute")
        artifacts = session.execute(select(TaskArtifact.name).where(TaskArtifact.task_id == ref.task_id)).all()
        assert [a.name for a in artifacts] == ["data.json"]


def test_the_steps_own_failures_fail_the_task_at_the_limit_and_outages_never(
    engine: Engine, make_key: MakeKey
) -> None:
    ref = _running_task(engine, make_key)

    def outage() -> Performed:
        raise ArtifactStoreUnavailable("the object store is down")

    def bug() -> Performed:
        raise RuntimeError("a bug")

    for number in range(1, 4):  # outages are recorded, and raised as they came, however many
        with pytest.raises(ArtifactStoreUnavailable):
            run_attempt(_tx(engine, ref), _run(ref, number), outage)
    for number in range(4, 4 + STEP_ATTEMPT_LIMIT - 1):
        with pytest.raises(RuntimeError):
            run_attempt(_tx(engine, ref), _run(ref, number), bug)
    with pytest.raises(StepGaveUp) as gave_up:
        run_attempt(_tx(engine, ref), _run(ref, 99), bug)
    assert gave_up.value.failures == STEP_ATTEMPT_LIMIT and isinstance(gave_up.value.cause, RuntimeError)
    codes = [code for _, _, code in _attempts(engine, ref)]
    assert codes == [STORE_OUTAGE] * 3 + ["RuntimeError"] * STEP_ATTEMPT_LIMIT
    with tenant_session(engine, ref.tenant_id) as session:
        step = session.execute(select(TaskStep).where(TaskStep.task_id == ref.task_id)).scalar_one()
        assert (step.status, step.attempts) == ("FAILED", 3 + STEP_ATTEMPT_LIMIT)


def test_a_business_failure_is_raised_as_itself_with_its_code_recorded(engine: Engine, make_key: MakeKey) -> None:
    ref = _running_task(engine, make_key)

    def no_data() -> Performed:
        raise StepFailed("no_data", "nothing to report for 2026-06")

    with pytest.raises(StepFailed):
        run_attempt(_tx(engine, ref), _run(ref), no_data)
    assert _attempts(engine, ref) == [(1, "FAILED", "no_data")]
