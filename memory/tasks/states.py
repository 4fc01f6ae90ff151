"""The task status machine of seed 003 §7.2, with programmatic guards.

A transition that is not in :data:`ALLOWED`, or whose guard does not hold,
raises a typed error: a status never changes silently, and a model's
suggestion can never move WAITING_FOR_APPROVAL straight to SUCCEEDED.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from memory.errors import Conflict


class TaskStatus(StrEnum):
    CREATED = "CREATED"
    READY = "READY"
    RUNNING = "RUNNING"
    WAITING_FOR_USER = "WAITING_FOR_USER"
    WAITING_FOR_EXTERNAL = "WAITING_FOR_EXTERNAL"
    WAITING_FOR_APPROVAL = "WAITING_FOR_APPROVAL"
    WAITING_FOR_OPERATOR = "WAITING_FOR_OPERATOR"
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    PAUSED = "PAUSED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


S = TaskStatus
TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED})
WAITING = frozenset({S.WAITING_FOR_USER, S.WAITING_FOR_EXTERNAL, S.WAITING_FOR_APPROVAL, S.WAITING_FOR_OPERATOR})

ALLOWED: dict[TaskStatus, frozenset[TaskStatus]] = {
    S.CREATED: frozenset({S.READY, S.CANCELLED, S.FAILED}),
    S.READY: frozenset({S.RUNNING, S.PAUSED, S.CANCELLED, S.FAILED}),
    # RUNNING → RUNNING is progress: a step finished and the next one starts.
    S.RUNNING: frozenset(
        {S.RUNNING, *WAITING, S.RETRY_SCHEDULED, S.PAUSED, S.SUCCEEDED, S.FAILED, S.CANCELLED}
    ),
    S.WAITING_FOR_USER: frozenset({S.READY, S.CANCELLED, S.FAILED}),
    # Approved → READY (then publish); rejected → RUNNING (the draft is regenerated).
    S.WAITING_FOR_APPROVAL: frozenset({S.READY, S.RUNNING, S.CANCELLED, S.FAILED}),
    S.WAITING_FOR_EXTERNAL: frozenset({S.RUNNING, S.WAITING_FOR_OPERATOR, S.SUCCEEDED, S.CANCELLED, S.FAILED}),
    S.WAITING_FOR_OPERATOR: frozenset({S.RUNNING, S.SUCCEEDED, S.CANCELLED, S.FAILED}),
    S.RETRY_SCHEDULED: frozenset({S.RUNNING, S.PAUSED, S.CANCELLED, S.FAILED}),
    S.PAUSED: frozenset({S.READY, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


class IllegalTransition(Conflict):
    """The status machine has no edge from the current status to the requested one."""

    code = "illegal_transition"


class GuardFailed(Conflict):
    """The edge exists, but the condition that must hold for it does not."""

    code = "guard_failed"


@dataclass(frozen=True)
class TransitionFacts:
    """What the guards look at. Callers fill in what they verified against the read model."""

    draft_sha256: str | None = None
    approval_requested: bool = False
    approval_status: str | None = None
    approval_sha256: str | None = None
    approver_has_role: bool = False
    publication_confirmed: bool = False
    rejected: bool = False


def check_transition(current: TaskStatus, target: TaskStatus, facts: TransitionFacts = TransitionFacts()) -> None:
    """Raise unless ``current → target`` is an edge of the machine and its guard holds."""
    if target not in ALLOWED[current]:
        raise IllegalTransition(
            f"a task in {current} cannot move to {target}",
            details={"from": current.value, "to": target.value},
        )
    if (
        current is S.RUNNING
        and target is S.WAITING_FOR_APPROVAL
        and (not facts.draft_sha256 or not facts.approval_requested)
    ):
        raise GuardFailed("waiting for approval needs a valid draft artifact and a created approval request")
    if current is S.WAITING_FOR_APPROVAL and target is S.READY:
        if facts.approval_status != "APPROVED" or not facts.approver_has_role:
            raise GuardFailed("leaving the approval wait needs an approval by someone holding the approver role")
        if facts.approval_sha256 != facts.draft_sha256:
            raise GuardFailed("the approval is bound to another draft; the current draft needs its own approval")
    if current is S.WAITING_FOR_APPROVAL and target is S.RUNNING and not facts.rejected:
        raise GuardFailed("only a rejection sends a waiting task back to work on its draft")
    if target is S.SUCCEEDED and not facts.publication_confirmed:
        raise GuardFailed("a task succeeds only once the publication system confirmed the result")
