"""Approvals: a request bound to one draft's hash, the decision on it, and the re-check before publishing.

Who may decide (:func:`check_decider`) is judged before anything else, a replay of a recorded decision
included (:func:`is_replay`: only its own decider's). The rule a newcomer looks for, that an approval must
match the current draft's hash, is here in each of its three places: a decision names the draft it approves
(:func:`check_decision`, run by the workflow's validator: ``stale_artifact``), a new draft invalidates the
requests for older ones (:func:`request_approval`), and a publish re-reads the approval and the draft just
before it sends (:func:`recheck_before_publish`). The status machine's guard (:mod:`memory.tasks.states`)
refuses the approved edge once more when the facts handed to it disagree.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import Conflict, Forbidden, InvalidInput, NotFound
from memory.identity.auth import key_is_active, may_approve
from memory.models import ApiKey
from memory.tasks.artifacts import get_artifact
from memory.tasks.keys import approval_key
from memory.tasks.live import ApprovalDecision, TaskState
from memory.tasks.models import TaskApproval, TaskReminder
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus, TransitionFacts
from memory.tasks.transitions import Snapshot, Transition, get_task, move

S = TaskStatus


def matches_draft(approved_sha256: str | None, draft_sha256: str | None) -> bool:
    """An approval speaks for one draft only: the one whose hash it carries."""
    return draft_sha256 is not None and approved_sha256 == draft_sha256


# --- the decision, judged against the live task (the workflow's validator) ----------------------------


def check_decider(live: TaskState | None, request: ApprovalDecision) -> None:
    """Raise unless ``request``'s caller may decide on this task at all: the approver role and, under separation
    of duties, not its owner. Judged before any replay lookup, so that resending a decision is authorised
    exactly like making it (issue 23: the owner resent the approver's decision and got 200 "replayed")."""
    refusal = decider_refusal(request.user_id, request.roles, live.owner_user_id if live is not None else None,
                              owner_may_decide=request.owner_may_decide)
    if refusal is not None:
        raise refusal


APPROVER_NEEDED = "approving or rejecting a draft needs the approver role"


def check_request(roles: Iterable[str], decision: str, reason: str | None) -> None:
    """What any decision request must carry, whatever the task's state: the approver role, and a reason for a
    rejection. The API asks it before reaching the workflow; the workflow's validator asks it again."""
    if not may_approve(roles):
        raise Forbidden(APPROVER_NEEDED)
    if decision == "reject" and not (reason or "").strip():
        raise InvalidInput("a rejection needs a reason, so the draft can be revised", code="reason_required")


def decider_refusal(
    user_id: str, roles: Iterable[str], owner_user_id: str | None, *, owner_may_decide: bool
) -> Forbidden | None:
    """Why this person may not approve or reject a task's draft (None: they may). The console shows the reason
    where the buttons would be; the workflow's validator raises it."""
    if not may_approve(roles):
        return Forbidden(APPROVER_NEEDED)
    if user_id == owner_user_id and not owner_may_decide:
        return Forbidden(
            "you own this task, so another approver must decide on its draft (the tenant's separation of "
            "duties policy; an admin can change it with PUT /tenant-policy)",
            code="separation_of_duties",
        )
    return None


def is_replay(decided_by: str | None, request: ApprovalDecision) -> bool:
    """Whether ``request`` repeats a decision already recorded (its decision, draft hash and state version):
    only its own decider's; anyone else's identical request is judged as a new decision."""
    return decided_by is not None and decided_by == request.user_id


def check_decision(live: TaskState | None, request: ApprovalDecision) -> None:
    """Raise unless ``request`` may decide on the live task's current draft now."""
    check_decider(live, request)
    if request.decision not in ("approve", "reject"):
        raise InvalidInput("decision must be 'approve' or 'reject'", code="invalid_decision")
    check_request(request.roles, request.decision, request.reason)
    pending = live.pending_approval if live is not None else None
    if live is None or live.status != S.WAITING_FOR_APPROVAL.value or pending is None:
        status = live.status if live is not None else S.CREATED.value
        raise Conflict(f"the task is {status}, not waiting for approval", code="not_waiting_for_approval")
    if not matches_draft(request.artifact_sha256, pending.artifact_sha256):
        raise Conflict(
            "the draft changed since you read it: approve the current draft's sha256 "
            f"({pending.artifact_sha256})",
            code="stale_artifact",
        )
    if request.state_version != live.state_version:
        raise Conflict(
            f"the task is at state_version {live.state_version}, not {request.state_version}", code="version_conflict"
        )


# --- the read model ----------------------------------------------------------------------------------


def open_request(
    session: Session, ref: TaskRef, *, draft_sha256: str, approval_type: str, deadline_at: str, expected_version: int,
    step_id: str,
) -> tuple[TaskApproval, Snapshot]:
    """Request approval of a stored draft and wait for it (RUNNING → WAITING_FOR_APPROVAL)."""
    key = approval_key(ref.task_id, draft_sha256, approval_type)
    get_artifact(session, ref.tenant_id, ref.task_id, draft_sha256)  # a valid, stored draft
    approval = request_approval(
        session,
        tenant_id=ref.tenant_id,
        task_id=ref.task_id,
        artifact_sha256=draft_sha256,
        approval_type=approval_type,
        idempotency_key=key,
        approval_id=uuid.uuid5(uuid.NAMESPACE_URL, key),
        state_version=expected_version + 1,
        deadline_at=datetime.fromisoformat(deadline_at),
    )
    snapshot = move(
        session,
        ref,
        Transition(
            expected_version=expected_version,
            transition_id=f"{key}:requested",
            target=S.WAITING_FOR_APPROVAL,
            current_step_id=step_id,
            waiting_reason="APPROVAL",
            draft_sha256=draft_sha256,
            facts=TransitionFacts(draft_sha256=draft_sha256, approval_requested=True),
            checkpoint_reason="waiting_for_approval",
            pending_conditions=[
                {
                    "type": "APPROVAL",
                    "approval_id": str(approval.approval_id),
                    "artifact_sha256": draft_sha256,
                    "deadline_at": deadline_at,
                }
            ],
        ),
    )
    return approval, snapshot


def decide(
    session: Session,
    ref: TaskRef,
    approval_id: uuid.UUID,
    *,
    approved: bool,
    user_id: str,
    roles: list[str],
    reason: str | None,
    expected_version: int,
    redraft_step: str,
    step_id: str,
    next_step_id: str | None,
) -> Snapshot:
    """Record a decision once; approval → READY (publish), rejection → RUNNING (redraft the draft)."""
    approval = get_approval(session, ref.tenant_id, approval_id, lock=True)
    task = get_task(session, ref.tenant_id, ref.task_id)
    if approval.status == "PENDING":
        approval.status = "APPROVED" if approved else "REJECTED"
        approval.decided_by = user_id
        approval.decided_roles = sorted(roles)
        approval.decided_at = func.now()
        approval.reason = reason
    return move(
        session,
        ref,
        Transition(
            expected_version=expected_version,
            transition_id=f"decision:{approval_id}",
            target=S.READY if approved else S.RUNNING,
            current_step_id=next_step_id if approved else redraft_step,
            complete_step=step_id if approved else None,
            facts=TransitionFacts(
                draft_sha256=task.draft_sha256,
                approval_status=approval.status,
                approval_sha256=approval.artifact_sha256,
                approver_has_role=may_approve(roles),
                rejected=not approved,
            ),
            checkpoint_reason="approval_result",
            pending_conditions=[
                {"type": "APPROVAL_RESULT", "approval_id": str(approval_id), "decision": approval.status}
            ],
        ),
    )


def expire(session: Session, ref: TaskRef, approval_id: uuid.UUID, *, expected_version: int) -> Snapshot:
    """Nobody decided before the deadline: the request expires and the task fails."""
    approval = get_approval(session, ref.tenant_id, approval_id, lock=True)
    if approval.status == "PENDING":
        approval.status = "EXPIRED"
    return move(
        session,
        ref,
        Transition(
            expected_version=expected_version,
            transition_id=f"expire:{approval_id}",
            target=S.FAILED,
            error={"code": "approval_expired", "message": "nobody approved the draft before the deadline"},
            checkpoint_reason="approval_expired",
        ),
    )


def cancel_pending(session: Session, tenant_id: str, task_id: str) -> None:
    """A cancelled task's open request is closed with it."""
    pending = pending_approval(session, tenant_id, task_id)
    if pending is not None:
        pending.status = "CANCELLED"


def recheck_before_publish(
    session: Session, ref: TaskRef, approval_id: uuid.UUID, *, artifact_sha256: str, expected_version: int
) -> None:
    """TOCTOU: permission, state_version, approval APPROVED and the artifact hash, re-read just before a send."""
    task = get_task(session, ref.tenant_id, ref.task_id, lock=True)
    approval = get_approval(session, ref.tenant_id, approval_id)
    problems = []
    if task.state_version != expected_version:
        problems.append(f"state_version is {task.state_version}, not {expected_version}")
    if approval.status != "APPROVED":
        problems.append(f"the approval is {approval.status}")
    if not (matches_draft(approval.artifact_sha256, task.draft_sha256) and artifact_sha256 == task.draft_sha256):
        problems.append("the approved artifact is not the current draft")
    approver_keys = session.execute(
        select(ApiKey.roles).where(
            ApiKey.tenant_id == ref.tenant_id, ApiKey.user_id == approval.decided_by, key_is_active()
        )
    ).scalars()
    if not any(may_approve(roles) for roles in approver_keys):
        problems.append(f"{approval.decided_by} no longer holds the approver role")
    owner_active = session.execute(
        select(ApiKey.key_id).where(
            ApiKey.tenant_id == ref.tenant_id, ApiKey.user_id == task.owner_user_id, key_is_active()
        )
    ).first()
    if owner_active is None:
        problems.append(f"the task owner {task.owner_user_id} has no active credential")
    if problems:
        message = "publishing refused: " + "; ".join(problems)
        raise Conflict(message, code="publish_refused", details={"problems": problems})


def request_approval(
    session: Session,
    *,
    tenant_id: str,
    task_id: str,
    artifact_sha256: str,
    approval_type: str,
    idempotency_key: str,
    approval_id: uuid.UUID,
    state_version: int,
    deadline_at: datetime,
) -> TaskApproval:
    """One request per (task, artifact hash, type); pending requests for older drafts are INVALIDATED."""
    session.execute(
        update(TaskApproval)
        .where(
            TaskApproval.tenant_id == tenant_id,
            TaskApproval.task_id == task_id,
            TaskApproval.artifact_sha256 != artifact_sha256,
            TaskApproval.status.in_(("PENDING", "APPROVED")),
        )
        .values(status="INVALIDATED")
    )
    session.execute(
        insert(TaskApproval)
        .values(
            tenant_id=tenant_id,
            approval_id=approval_id,
            task_id=task_id,
            approval_type=approval_type,
            artifact_sha256=artifact_sha256,
            idempotency_key=idempotency_key,
            status="PENDING",
            requested_state_version=state_version,
            deadline_at=deadline_at,
        )
        .on_conflict_do_nothing()
    )
    return approval_by_key(session, tenant_id, idempotency_key)


def approval_by_key(session: Session, tenant_id: str, idempotency_key: str) -> TaskApproval:
    return session.execute(
        select(TaskApproval).where(TaskApproval.tenant_id == tenant_id, TaskApproval.idempotency_key == idempotency_key)
    ).scalar_one()


def get_approval(session: Session, tenant_id: str, approval_id: uuid.UUID, *, lock: bool = False) -> TaskApproval:
    query = select(TaskApproval).where(TaskApproval.tenant_id == tenant_id, TaskApproval.approval_id == approval_id)
    row = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if row is None:
        raise NotFound(f"approval {approval_id} does not exist")
    return row


def record_reminder(session: Session, tenant_id: str, approval_id: uuid.UUID, number: int) -> bool:
    """Idempotent by (approval, reminder number): returns False when this reminder was already sent."""
    inserted = session.execute(
        insert(TaskReminder)
        .values(tenant_id=tenant_id, approval_id=approval_id, reminder_number=number)
        .on_conflict_do_nothing()
        .returning(TaskReminder.reminder_number)
    ).scalar_one_or_none()
    if inserted is not None:
        session.execute(
            update(TaskApproval)
            .where(TaskApproval.tenant_id == tenant_id, TaskApproval.approval_id == approval_id)
            .values(reminders_sent=number)
        )
    return inserted is not None


def pending_approval(session: Session, tenant_id: str, task_id: str) -> TaskApproval | None:
    return session.execute(
        select(TaskApproval)
        .where(TaskApproval.tenant_id == tenant_id, TaskApproval.task_id == task_id, TaskApproval.status == "PENDING")
        .order_by(TaskApproval.requested_at.desc())
        .limit(1)
    ).scalar_one_or_none()
