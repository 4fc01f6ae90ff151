"""Fill vectors asynchronously: per tenant until its backlog is empty, and a sweep over every tenant.

New writes clear their vector in the write transaction; these workflows compute
the missing ones. A model change makes every stored vector "from another model",
so the same backlog query re-embeds the corpus: that is the re-embedding job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from workflows.sweeps import SHARED_TENANTS, SweepPaging, continue_if_stopped, each_tenant

with workflow.unsafe.imports_passed_through():
    from activities.embedding import EmbedBatchInput, EmbeddingActivities
    from activities.tenants import SweepKind

SCHEDULE_ID = "mnemo-embedding-sweep"
SWEEP_EVERY = timedelta(seconds=10)
"""How often the Schedule sweeps every tenant's backlog: a new memory's vector exists within about this long
(plus the batch's own time), which the write's answer tells the caller."""


@dataclass(frozen=True)
class EmbedBacklogInput:
    tenant_id: str
    batch_size: int = 64


@dataclass(frozen=True)
class EmbedBacklogResult:
    written: int
    refused: int
    batches: int


@dataclass(frozen=True)
class EmbeddingSweepInput:
    batch_size: int = 64
    paging: SweepPaging = field(default_factory=SweepPaging)


def embedding_workflow_id(tenant_id: str) -> str:
    return f"embedding-{tenant_id}"


SWEEP_ATTEMPTS = RetryPolicy(maximum_attempts=3)
"""In a sweep, a tenant whose batch keeps failing is left for the next sweep: it must not hold the others back."""


async def _drain(tenant_id: str, batch_size: int, retry_policy: RetryPolicy | None = None) -> EmbedBacklogResult:
    written = refused = batches = 0
    while True:
        result = await workflow.execute_activity_method(
            EmbeddingActivities.embed_batch,
            EmbedBatchInput(tenant_id, batch_size),
            start_to_close_timeout=timedelta(minutes=10),
            retry_policy=retry_policy,
        )
        batches += 1
        written += result.written
        refused += result.refused
        # Stop on an empty batch, and on one where nothing could be written (no livelock on refusals).
        if result.pending == 0 or result.written == 0:
            return EmbedBacklogResult(written, refused, batches)


@workflow.defn(name="EmbedBacklog")
class EmbedBacklogWorkflow:
    @workflow.run
    async def run(self, request: EmbedBacklogInput) -> EmbedBacklogResult:
        return await _drain(request.tenant_id, request.batch_size)


@workflow.defn(name="EmbeddingSweep")
class EmbeddingSweepWorkflow:
    """Started by a Schedule: drains every tenant's backlog, so vectors follow writes within one interval."""

    @workflow.run
    async def run(self, request: EmbeddingSweepInput) -> int:
        async def drain(tenant_id: str) -> int:
            try:
                return (await _drain(tenant_id, request.batch_size, SWEEP_ATTEMPTS)).written
            except ActivityError as exc:
                workflow.logger.error(
                    "embedding sweep: tenant %s failed (%s); the next sweep retries it", tenant_id, exc.cause
                )
                return 0

        swept = await each_tenant(drain, SweepKind.EMBEDDING, request.paging,
                                  before_shared=not workflow.patched(SHARED_TENANTS))
        continue_if_stopped(swept, request)
        return swept.total
