"""The Temporal client the API and CLI share."""

from __future__ import annotations

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from api.settings import Settings


async def connect(settings: Settings) -> Client:
    return await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)


async def namespace_ready(client: Client) -> None:
    """Raises unless the frontend answers and our namespace exists."""
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace))
