"""The agent protocol (issue 26, item 2): who may perform a task's steps, what an agent delivers, and the nudge to
the workflow once the database has it. The REST router and the MCP tools call these same functions.

Who: the task's owner, which includes an ``agent_runtime`` key of the owner's user (a key has one user). Someone
who may not read the task gets the 404 of a missing one; a colleague who may read it (approver, operator,
auditor) the 403 of an action that is not theirs, as for pause and cancel. The rules of leases and attempts are
:mod:`memory.tasks.leases`'; the workflow is only signalled (:data:`~memory.tasks.leases.SETTLED_SIGNAL`) after
the commit, best effort: when Temporal is down or the workflow is not waiting, the answer is the same and the
workflow's own poll collects the step.
"""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from datetime import timedelta
from functools import partial

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.service import RPCError

from api.schemas.task_attempts import (
    ArtifactRefOut,
    ClaimIn,
    ClaimOut,
    CompleteIn,
    CompleteOut,
    FailIn,
    FailOut,
    HeartbeatOut,
    StepInputOut,
)
from api.services.client import ClientSource, TemporalUnavailable
from api.services.task_reads import readable, task_id_of
from api.services.tasks import read_model_owner
from memory.artifact_store import ArtifactStore
from memory.db import tenant_session
from memory.errors import Forbidden, InvalidInput, NotFound
from memory.identity.auth import PrincipalContext
from memory.tasks import keys, leases
from memory.tasks.artifacts import ArtifactMeta, task_store
from memory.tasks.attempts import Transaction
from memory.tasks.ref import TaskRef

log = logging.getLogger("mnemo.tasks.agents")
SIGNAL_TIMEOUT = timedelta(seconds=5)


def performer(engine: Engine, principal: PrincipalContext, raw_task_id: str) -> TaskRef:
    """The task, if the caller may perform its steps (see the module docstring), decided from the read model."""
    task_id = task_id_of(raw_task_id)
    owner = read_model_owner(engine, principal.tenant_id, task_id)
    if owner is None:
        raise NotFound(f"task {task_id} does not exist")
    if owner != principal.user_id:
        readable(principal, owner, task_id)
        raise Forbidden("a task's steps are performed by its owner, or an agent_runtime key of the owner's user; "
                        "use one of their keys")
    return TaskRef(principal.tenant_id, task_id)


def _transaction(engine: Engine, ref: TaskRef) -> Transaction:
    return partial(tenant_session, engine, ref.tenant_id)


def _attempt_id(raw: str, task_id: str) -> uuid.UUID:
    """A malformed path id is an attempt that does not exist."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NotFound(f"attempt {raw} does not exist in task {task_id}", code="attempt_not_found") from None


def claim(engine: Engine, principal: PrincipalContext, task_id: str, body: ClaimIn) -> ClaimOut:
    ref = performer(engine, principal, task_id)
    claimed = leases.claim(_transaction(engine, ref), ref, step_id=body.step_id, lease_seconds=body.lease_seconds,
                           actor=principal.agent_id or principal.user_id, worker=f"key:{principal.key_id}")
    attempt = claimed.attempt
    return ClaimOut(attempt_id=str(attempt.attempt_id), step_id=attempt.step_id, attempt_number=attempt.attempt_number,
                    lease_expires_at=claimed.lease_expires_at, input=StepInputOut.model_validate(claimed.input))


def heartbeat(engine: Engine, principal: PrincipalContext, task_id: str, attempt_id: str) -> HeartbeatOut:
    ref = performer(engine, principal, task_id)
    attempt = _attempt_id(attempt_id, ref.task_id)
    return HeartbeatOut(attempt_id=str(attempt),
                        lease_expires_at=leases.heartbeat(_transaction(engine, ref), ref, attempt))


def _stored(store: ArtifactStore, body: CompleteIn) -> list[ArtifactMeta]:
    """Each artifact decoded strictly, and only once all of them are valid put in the task store
    (content-addressed: a replay stores nothing new); a problem names the artifact's path in the body."""
    decoded: list[bytes] = []
    for number, artifact in enumerate(body.artifacts):
        where = f"artifacts.{number}"
        if artifact.name in (earlier.name for earlier in body.artifacts[:number]):
            raise InvalidInput(f"{where}.name: {artifact.name!r} is named twice; give each artifact its own name",
                               code="duplicate_artifact_name", details={"field": f"{where}.name"})
        try:
            decoded.append(base64.b64decode(artifact.content_base64, validate=True))
        except binascii.Error as exc:
            raise InvalidInput(f"{where}.content_base64: not standard base64 with padding ({exc}); encode the bytes "
                               "with RFC 4648 §4", code="invalid_base64",
                               details={"field": f"{where}.content_base64"}) from None
    return [ArtifactMeta(task_store(store).put(content), artifact.name, leases.AGENT_ARTIFACT_KIND,
                         artifact.media_type, len(content))
            for artifact, content in zip(body.artifacts, decoded, strict=True)]


async def complete(
    engine: Engine, temporal: ClientSource, store: ArtifactStore, principal: PrincipalContext, task_id: str,
    attempt_id: str, body: CompleteIn,
) -> CompleteOut:
    """Store the bytes (outside any transaction), record the result, then nudge the workflow (a replay nudges
    again: its first nudge may have been lost)."""
    ref = await run_in_threadpool(performer, engine, principal, task_id)
    attempt = _attempt_id(attempt_id, ref.task_id)
    metas = await run_in_threadpool(_stored, store, body)
    delivered = [{"name": m.name, "media_type": m.media_type, "sha256": m.sha256} for m in metas]
    done = await run_in_threadpool(partial(
        leases.complete, _transaction(engine, ref), ref, attempt, artifacts=metas, output=body.output,
        body_digest=keys.digest({"artifacts": delivered, "output": body.output}),
    ))
    await _nudge(temporal, ref, done.step_id, done.input_version)
    return CompleteOut(attempt_id=str(attempt), step_id=done.step_id, status="SUCCEEDED", replayed=done.replayed,
                       artifacts=[ArtifactRefOut(step_id=done.step_id, **ref_) for ref_ in delivered])


async def fail(
    engine: Engine, temporal: ClientSource, principal: PrincipalContext, task_id: str, attempt_id: str, body: FailIn,
) -> FailOut:
    ref = await run_in_threadpool(performer, engine, principal, task_id)
    attempt = _attempt_id(attempt_id, ref.task_id)
    failed = await run_in_threadpool(partial(
        leases.fail, _transaction(engine, ref), ref, attempt, reason=body.reason, retryable=body.retryable,
        body_digest=keys.digest(body.model_dump()),
    ))
    await _nudge(temporal, ref, failed.step_id, failed.input_version)
    return FailOut(attempt_id=str(attempt), step_id=failed.step_id, status="FAILED",
                   step_status=failed.step_status, replayed=failed.replayed)


async def _nudge(temporal: ClientSource, ref: TaskRef, step_id: str, input_version: str) -> None:
    """Signal the workflow that the step settled. Best effort: the result is committed, and the workflow's poll
    finds it should Temporal be down or the workflow not (or no longer) running."""
    try:
        client = await temporal()
        await client.get_workflow_handle(ref.workflow_id).signal(
            leases.SETTLED_SIGNAL, {"step_id": step_id, "input_version": input_version}, rpc_timeout=SIGNAL_TIMEOUT)
    except (TemporalUnavailable, RPCError, RuntimeError) as exc:
        log.warning("the %s signal to %s was not delivered (%s): the workflow's poll collects step %s",
                    leases.SETTLED_SIGNAL, ref.workflow_id, exc, step_id)
