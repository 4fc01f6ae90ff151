"""The status machine's guards and the read model's optimistic locking, against real PostgreSQL."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from sqlalchemy import Engine, select
from temporalio.exceptions import ApplicationError

from activities.tasks import TaskActivities
from activities.tasks.payloads import TransitionInput
from api.settings import Settings
from memory.db import tenant_session
from memory.errors import NotFound, VersionConflict
from memory.tasks import keys, transitions
from memory.tasks.models import Task
from memory.tasks.ref import TaskRef
from memory.tasks.states import (
    ALLOWED,
    TERMINAL,
    GuardFailed,
    IllegalTransition,
    TaskStatus,
    TransitionFacts,
    check_transition,
)
from memory.tasks.timeline import timeline
from tests.conftest import MakeKey

S = TaskStatus


def test_terminal_statuses_have_no_way_out() -> None:
    for terminal in TERMINAL:
        for target in S:
            with pytest.raises(IllegalTransition):
                check_transition(terminal, target)


def test_a_model_cannot_jump_from_approval_wait_to_success() -> None:
    with pytest.raises(IllegalTransition) as refused:
        check_transition(S.WAITING_FOR_APPROVAL, S.SUCCEEDED, TransitionFacts(publication_confirmed=True))
    assert refused.value.code == "illegal_transition" and refused.value.http_status == 409


@pytest.mark.parametrize(
    ("current", "target", "facts", "allowed"),
    [
        (S.RUNNING, S.WAITING_FOR_APPROVAL, TransitionFacts(draft_sha256="a" * 64, approval_requested=True), True),
        (S.RUNNING, S.WAITING_FOR_APPROVAL, TransitionFacts(draft_sha256="a" * 64), False),
        (S.RUNNING, S.WAITING_FOR_APPROVAL, TransitionFacts(approval_requested=True), False),
        (
            S.WAITING_FOR_APPROVAL,
            S.READY,
            TransitionFacts(draft_sha256="a", approval_status="APPROVED", approval_sha256="a", approver_has_role=True),
            True,
        ),
        (
            S.WAITING_FOR_APPROVAL,
            S.READY,
            TransitionFacts(draft_sha256="b", approval_status="APPROVED", approval_sha256="a", approver_has_role=True),
            False,
        ),
        (
            S.WAITING_FOR_APPROVAL,
            S.READY,
            TransitionFacts(draft_sha256="a", approval_status="APPROVED", approval_sha256="a", approver_has_role=False),
            False,
        ),
        (
            S.WAITING_FOR_APPROVAL,
            S.READY,
            TransitionFacts(draft_sha256="a", approval_status="PENDING", approval_sha256="a", approver_has_role=True),
            False,
        ),
        (S.WAITING_FOR_APPROVAL, S.RUNNING, TransitionFacts(rejected=True), True),
        (S.WAITING_FOR_APPROVAL, S.RUNNING, TransitionFacts(), False),
        (S.RUNNING, S.SUCCEEDED, TransitionFacts(publication_confirmed=True), True),
        (S.RUNNING, S.SUCCEEDED, TransitionFacts(), False),
        (S.WAITING_FOR_EXTERNAL, S.SUCCEEDED, TransitionFacts(), False),
    ],
)
def test_guards(current: S, target: S, facts: TransitionFacts, allowed: bool) -> None:
    if allowed:
        check_transition(current, target, facts)
    else:
        with pytest.raises(GuardFailed):
            check_transition(current, target, facts)


def test_every_status_is_in_the_machine() -> None:
    assert set(ALLOWED) == set(S)
    assert all(targets <= set(S) for targets in ALLOWED.values())


def test_idempotency_keys_follow_seed_003() -> None:
    assert keys.task_id_for("t", "u", "i") == keys.task_id_for("t", "u", "i")
    assert keys.task_id_for("t", "u", "i") != keys.task_id_for("t", "v", "i")
    assert keys.task_id_for("t", "u", "i") != keys.task_id_for("s", "u", "i")
    assert keys.workflow_id("t", "x") == "task-t-x"
    assert keys.step_key("x", "load_data", "v1") == "step:x:load_data:v1"
    assert keys.approval_key("x", "h", "publish") == "approval:x:h:publish"
    assert keys.publish_key("x", "h", "reports") == "publish:x:h:reports"
    assert keys.digest({"b": 1, "a": 2}) == keys.digest({"a": 2, "b": 1})


def _new_task(engine: Engine, tenant: str) -> str:
    task_id = str(uuid.uuid4())
    with tenant_session(engine, tenant) as session:
        transitions.insert_task(
            session,
            transitions.NewTask(
                ref=TaskRef(tenant, task_id),
                owner_user_id="alice",
                task_type="monthly-report",
                goal={"month": "2026-06", "currency": "CNY"},
                request_intent_id="i",
                create_key=f"create:{task_id}",
                destination="reports",
                workflow_id=f"task-{tenant}-{task_id}",
                run_id=None,
                workflow_version="monthly-report-v1",
                transition_id="t0",
            ),
        )
    return task_id


def test_writes_are_checked_against_state_version(engine: Engine, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    task_id = _new_task(engine, tenant)
    start = transitions.Transition(1, "t1", S.RUNNING, current_step_id="load_data", checkpoint_reason="running")
    with tenant_session(engine, tenant) as session:
        assert transitions.apply_transition(session, tenant, task_id, start).state_version == 2
    # The same transition again (an activity retried after its commit) is recognised, not repeated.
    with tenant_session(engine, tenant) as session:
        again = transitions.apply_transition(session, tenant, task_id, start)
        assert (again.state_version, again.status) == (2, "RUNNING")
    # Another writer that read version 1 is refused and changes nothing.
    with pytest.raises(VersionConflict) as conflict, tenant_session(engine, tenant) as session:
        transitions.apply_transition(session, tenant, task_id, transitions.Transition(1, "t-other", S.PAUSED))
    assert conflict.value.details == {"state_version": 2}
    # A guard failure rolls the whole transaction back.
    with pytest.raises(GuardFailed), tenant_session(engine, tenant) as session:
        transitions.apply_transition(
            session, tenant, task_id, transitions.Transition(2, "t2", S.SUCCEEDED, checkpoint_reason="x")
        )
    with tenant_session(engine, tenant) as session:
        task = transitions.get_task(session, tenant, task_id)
        assert (task.state_version, task.status) == (2, "RUNNING")
        assert [e["reason"] for e in timeline(session, tenant, task_id) if e["kind"] == "checkpoint"] == [
            "created",
            "running",
        ]


def test_the_read_model_is_tenant_scoped(engine: Engine, make_key: MakeKey) -> None:
    tenant, other = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    make_key(tenant=other)
    task_id = _new_task(engine, tenant)
    with pytest.raises(NotFound), tenant_session(engine, other) as session:
        transitions.get_task(session, other, task_id)
    with tenant_session(engine, other) as session:  # row-level security: even without the tenant filter
        assert session.execute(select(Task).where(Task.task_id == task_id)).first() is None


def test_the_workflows_failure_verdict_lands_even_after_a_late_attempt_committed(
    engine: Engine, make_key: MakeKey, settings: Settings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    task_id = _new_task(engine, tenant)
    with tenant_session(engine, tenant) as session:  # a timed-out attempt that still committed its step
        transitions.apply_transition(session, tenant, task_id, transitions.Transition(1, "late", S.RUNNING))
    activities = TaskActivities(engine, settings.artifact_root(engine))
    verdict = TransitionInput(
        tenant, task_id, 1, "fail-1", "FAILED", "unrecoverable_error", error={"code": "step_failed", "message": "x"}
    )
    with pytest.raises(ApplicationError) as refused:
        activities.transition(verdict)
    assert refused.value.type == "version_conflict"
    forced = activities.transition(dataclasses.replace(verdict, force_from_newer_version=True))
    assert (forced.state_version, forced.status) == (3, "FAILED")
    assert (
        activities.transition(dataclasses.replace(verdict, force_from_newer_version=True)) == forced
    )  # a retry replays
