"""The agent protocol over HTTP (issue 26, item 2): an agent outside the worker claims the step its task waits on,
renews the lease, and completes or fails it. Only translates HTTP: :mod:`api.services.task_attempts` decides."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import ArtifactsDep, CurrentPrincipal, EngineDep, TemporalSource
from api.schemas.task_attempts import ClaimIn, ClaimOut, CompleteIn, CompleteOut, FailIn, FailOut, HeartbeatOut
from api.services import task_attempts

router = APIRouter(tags=["tasks"])


@router.post("/tasks/{task_id}/attempts", status_code=status.HTTP_201_CREATED, response_model=ClaimOut)
def claim(task_id: str, principal: CurrentPrincipal, engine: EngineDep, body: ClaimIn | None = None) -> ClaimOut:
    """Claim the step the task waits on for an agent: a new attempt holding it for ``lease_seconds``, with its
    input. 409 ``no_step_ready`` when the task waits for no agent, ``step_claimed`` while another lease is live."""
    return task_attempts.claim(engine, principal, task_id, body or ClaimIn())


@router.post("/tasks/{task_id}/attempts/{attempt_id}/heartbeat", response_model=HeartbeatOut)
def heartbeat(task_id: str, attempt_id: str, principal: CurrentPrincipal, engine: EngineDep) -> HeartbeatOut:
    """Renew the lease by the seconds it was claimed for. 409 ``lease_expired`` once it ran out."""
    return task_attempts.heartbeat(engine, principal, task_id, attempt_id)


@router.post("/tasks/{task_id}/attempts/{attempt_id}/complete", response_model=CompleteOut)
async def complete(
    task_id: str, attempt_id: str, body: CompleteIn, principal: CurrentPrincipal, engine: EngineDep,
    store: ArtifactsDep, temporal: TemporalSource,
) -> CompleteOut:
    """Deliver the step's artifacts and output. The same body again is a replay (``replayed: true``); another body
    for a finished attempt is a 409 ``attempt_finished``; after the lease ran out a 409 ``lease_expired``."""
    return await task_attempts.complete(engine, temporal, store, principal, task_id, attempt_id, body)


@router.post("/tasks/{task_id}/attempts/{attempt_id}/fail", response_model=FailOut)
async def fail(
    task_id: str, attempt_id: str, body: FailIn, principal: CurrentPrincipal, engine: EngineDep,
    temporal: TemporalSource,
) -> FailOut:
    """The step could not be done: retryable, it may be claimed again (up to 5 failures); else its task fails."""
    return await task_attempts.fail(engine, temporal, principal, task_id, attempt_id, body)
