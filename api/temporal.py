"""The Temporal client the API and CLI share."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    WorkflowHandle,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.runtime import Runtime

from api.observability.tracing import temporal_interceptors
from api.settings import Settings
from workflows import search_attributes
from workflows.embedding import SCHEDULE_ID as EMBEDDING_SCHEDULE_ID
from workflows.embedding import SWEEP_EVERY as EMBEDDING_SWEEP_EVERY
from workflows.embedding import EmbeddingSweepInput, EmbeddingSweepWorkflow
from workflows.fairness import tenant_priority
from workflows.knowledge_review import SWEEP_SCHEDULE_ID as KNOWLEDGE_SWEEP_SCHEDULE_ID
from workflows.knowledge_review import KnowledgeReviewSweepInput, KnowledgeReviewSweepWorkflow
from workflows.projection import (
    RebuildProjectionInput,
    RebuildProjectionResult,
    RebuildProjectionWorkflow,
    rebuild_workflow_id,
)
from workflows.retention import SCHEDULE_ID as RETENTION_SCHEDULE_ID
from workflows.retention import RetentionSweepWorkflow, SweepInput
from workflows.session_commit import SWEEP_SCHEDULE_ID, SessionCommitSweepWorkflow, SessionSweepInput


async def connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """The client (with the tracing interceptor when tracing is on); ``runtime``: the worker's, with SDK metrics."""
    return await Client.connect(
        settings.temporal_address, namespace=settings.temporal_namespace, interceptors=temporal_interceptors(),
        runtime=runtime,
    )


async def namespace_ready(client: Client) -> None:
    """Raises unless the frontend answers and our namespace exists."""
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace))


async def start_projection_rebuild(
    client: Client, task_queue: str, tenant_id: str, batch_size: int = 500
) -> WorkflowHandle[Any, RebuildProjectionResult]:
    """Start (or join, if one runs) the tenant's projection rebuild; its id makes a double start harmless."""
    return await client.start_workflow(
        RebuildProjectionWorkflow.run,
        RebuildProjectionInput(tenant_id=tenant_id, batch_size=batch_size),
        id=rebuild_workflow_id(tenant_id),
        task_queue=task_queue,
        priority=tenant_priority(tenant_id),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes([SearchAttributePair(search_attributes.TENANT, tenant_id)]),
    )


async def ensure_interval_schedule(
    client: Client, schedule_id: str, run: Any, arg: Any, task_queue: str, every: timedelta
) -> ScheduleHandle:
    """A Schedule starting ``run(arg)`` every ``every`` (skipping overlaps); created once, left alone if it exists."""
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(run, arg, id=f"{schedule_id}-run", task_queue=task_queue),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    try:
        return await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:
        return client.get_schedule_handle(schedule_id)


async def ensure_retention_schedule(
    client: Client, task_queue: str, every: timedelta, schedule_id: str = RETENTION_SCHEDULE_ID
) -> ScheduleHandle:
    """The Schedule that starts retention sweeps."""
    return await ensure_interval_schedule(
        client, schedule_id, RetentionSweepWorkflow.run, SweepInput(), task_queue, every
    )


async def ensure_embedding_schedule(
    client: Client, task_queue: str, every: timedelta = EMBEDDING_SWEEP_EVERY, schedule_id: str = EMBEDDING_SCHEDULE_ID
) -> ScheduleHandle:
    """The Schedule that sweeps embedding backlogs."""
    return await ensure_interval_schedule(
        client, schedule_id, EmbeddingSweepWorkflow.run, EmbeddingSweepInput(), task_queue, every
    )


async def ensure_session_sweep_schedule(
    client: Client, task_queue: str, every: timedelta = timedelta(minutes=1), schedule_id: str = SWEEP_SCHEDULE_ID
) -> ScheduleHandle:
    """The Schedule that commits idle sessions and starts commits accepted while Temporal was down."""
    return await ensure_interval_schedule(
        client, schedule_id, SessionCommitSweepWorkflow.run, SessionSweepInput(), task_queue, every
    )


async def ensure_knowledge_review_schedule(
    client: Client, task_queue: str, every: timedelta = timedelta(minutes=1),
    schedule_id: str = KNOWLEDGE_SWEEP_SCHEDULE_ID,
) -> ScheduleHandle:
    """The Schedule that starts reviews of candidates opened by the worker's pipelines (or while Temporal was down)."""
    return await ensure_interval_schedule(
        client, schedule_id, KnowledgeReviewSweepWorkflow.run, KnowledgeReviewSweepInput(), task_queue, every
    )
