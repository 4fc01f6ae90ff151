"""The Temporal client the API and CLI share."""

from __future__ import annotations

from typing import Any

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy

from api.settings import Settings
from workflows import search_attributes
from workflows.projection import (
    RebuildProjectionInput,
    RebuildProjectionResult,
    RebuildProjectionWorkflow,
    rebuild_workflow_id,
)


async def connect(settings: Settings) -> Client:
    return await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)


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
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes([SearchAttributePair(search_attributes.TENANT, tenant_id)]),
    )
