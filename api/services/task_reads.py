"""Reading a report task: who may see it, its view (live while it runs, the read model once closed), its
timeline and its artifacts. What ``/tasks/{id}`` and the console's task pages share.

Another user's task must be indistinguishable from a missing one (issue 12, finding 11): the same 404 body,
and no extra round trip to Temporal that would make it slower than a random id. So the read model is asked
first (:func:`gate`) and Temporal only after, through a :data:`~api.services.client.ClientSource`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from temporalio.client import WorkflowExecutionStatus

from api.schemas.tasks import PublicationListOut, PublicationOut, TaskView, TimelineOut
from api.services import tasks
from api.services.client import ClientSource
from memory.artifact_store import ArtifactStore
from memory.db import tenant_session
from memory.errors import NotFound
from memory.identity.auth import PrincipalContext, may_operate, may_read_every_task
from memory.store.policies import Policy, tenant_policy
from memory.tasks import artifacts, keys, transitions
from memory.tasks.approvals import pending_approval
from memory.tasks.artifacts import task_store
from memory.tasks.destinations import archived
from memory.tasks.models import TaskArtifact
from memory.tasks.operations import operations
from memory.tasks.timeline import timeline as read_timeline

_TASK_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
RUNNING = WorkflowExecutionStatus.RUNNING


def task_id_of(raw: str) -> str:
    """A path's task id; a malformed one is a task that does not exist."""
    if not _TASK_ID.match(raw):
        raise NotFound(f"task {raw} does not exist")
    return raw


def readable(principal: PrincipalContext, owner_user_id: str | None, task_id: str) -> None:
    """A task is its owner's; approvers, operators and auditors read every task of their tenant.
    Anyone else gets the 404 of a task that does not exist."""
    others = owner_user_id is not None and owner_user_id != principal.user_id
    if others and not may_read_every_task(principal.roles):
        raise NotFound(f"task {task_id} does not exist")


async def gate(engine: Engine, principal: PrincipalContext, task_id: str, *, control: bool = False) -> None:
    """Refuse a task the caller may not see from the read model, before any Temporal call.

    A task with no row yet (its first activity has not run) goes on to Temporal like a missing one, and the
    owner check there (the live state, the workflow's validators) decides. ``control``: the owner and
    operators (and admins) may pause, resume and cancel, and readers (approvers, auditors) see it and so get
    the 403.
    """
    owner = await run_in_threadpool(tasks.read_model_owner, engine, principal.tenant_id, task_id)
    if owner is None or owner == principal.user_id:
        return
    if control and may_operate(principal.roles):
        return
    readable(principal, owner, task_id)


def read_task(engine: Engine, tenant_id: str, task_id: str) -> TaskView:
    """The task as its read model has it."""
    with tenant_session(engine, tenant_id) as session:
        task = transitions.get_task(session, tenant_id, task_id)
        pending = pending_approval(session, tenant_id, task_id)
        return TaskView.from_read_model(task, pending, operations(session, tenant_id, task_id))


async def task_view(temporal: ClientSource, engine: Engine, principal: PrincipalContext, task_id: str) -> TaskView:
    """The live state while the workflow runs (and answers its query), else the read model; a workflow whose
    first step is not recorded yet is shown as such."""
    client = await temporal()
    handle = client.get_workflow_handle(keys.workflow_id(principal.tenant_id, task_id))
    described = await tasks.describe(handle)
    if described is not None and described.status == RUNNING:
        state = await tasks.live_state(handle)
        if state is not None and state.tenant_id == principal.tenant_id:
            return TaskView.from_live(state, described.run_id)
    if described is None:
        return await run_in_threadpool(read_task, engine, principal.tenant_id, task_id)
    try:
        return await run_in_threadpool(read_task, engine, principal.tenant_id, task_id)
    except NotFound:
        return TaskView.not_recorded_yet(task_id, handle.id, described.run_id)


async def get_task(temporal: ClientSource, engine: Engine, principal: PrincipalContext, task_id: str) -> TaskView:
    """The task the caller may read: live while it runs, the read model once it has closed."""
    task_id = task_id_of(task_id)
    await gate(engine, principal, task_id)
    view = await task_view(temporal, engine, principal, task_id)
    readable(principal, view.owner_user_id, task_id)
    return view


async def timeline(temporal: ClientSource, engine: Engine, principal: PrincipalContext, task_id: str) -> TimelineOut:
    """Attempts, checkpoints, approvals, reminders and operations merged in time order."""
    task_id = task_id_of(task_id)

    def read() -> tuple[TaskView, list[dict[str, Any]]]:
        with tenant_session(engine, principal.tenant_id) as session:
            task = transitions.get_task(session, principal.tenant_id, task_id)
            return TaskView.row(task), read_timeline(session, principal.tenant_id, task_id)

    row, entries = await run_in_threadpool(read)
    readable(principal, row.owner_user_id, task_id)
    client = await temporal()
    described = await tasks.describe(client.get_workflow_handle(row.workflow_id))
    return TimelineOut(
        task_id=task_id,
        status=row.status,
        state_version=row.state_version,
        workflow_id=row.workflow_id,
        run_id=described.run_id if described is not None else row.run_id,
        workflow_status=described.status.name if described is not None and described.status else None,
        entries=[
            {key: value.isoformat() if hasattr(value, "isoformat") else value for key, value in entry.items()}
            for entry in entries
        ],
    )


def open_artifact(
    engine: Engine, store: ArtifactStore, principal: PrincipalContext, task_id: str, sha256: str
) -> tuple[TaskArtifact, Iterator[bytes]]:
    """The artifact's row and its bytes in chunks, if this task in the caller's tenant produced it. The store is
    asked at once: bytes it lacks are a typed error (``artifact_unavailable``), never a cut-off download."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise NotFound(f"artifact {sha256} does not exist in task {task_id}")
    with tenant_session(engine, principal.tenant_id) as session:
        owner = transitions.get_task(session, principal.tenant_id, task_id_of(task_id)).owner_user_id
        readable(principal, owner, task_id)
        artifact = artifacts.get_artifact(session, principal.tenant_id, task_id_of(task_id), sha256)
    return artifact, task_store(store).open(sha256)


def publications(engine: Engine, principal: PrincipalContext, task_id: str) -> PublicationListOut:
    """The task's confirmed publications, from its own operations (the tenant's rows, never the shared
    ``publications`` table); an archived one's url is the published artifact here, under the task's access."""
    task_id = task_id_of(task_id)
    with tenant_session(engine, principal.tenant_id) as session:
        readable(principal, transitions.get_task(session, principal.tenant_id, task_id).owner_user_id, task_id)
        published = [op for op in operations(session, principal.tenant_id, task_id)
                     if op.kind == "publish" and op.status == "SUCCEEDED"]
    return PublicationListOut(items=[
        PublicationOut(publication_id=op.publication_id, destination=op.destination, artifact_sha256=op.artifact_sha256,
                       url=f"/tasks/{task_id}/artifacts/{op.artifact_sha256}" if archived(op.location) else op.location)
        for op in published
    ])


def tenant_policy_of(engine: Engine, tenant_id: str) -> Policy:
    """The tenant's policy (separation of duties), read at decision time."""
    with tenant_session(engine, tenant_id) as session:
        return tenant_policy(session, tenant_id)
