"""Rebuild a tenant's search projection from its source rows, batch by batch.

The projection is derived data: when tokenisation changes, or an index is
suspected stale, this workflow re-derives it without touching a source row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.projection import ProjectionActivities, RebuildBatchInput


@dataclass(frozen=True)
class RebuildProjectionInput:
    tenant_id: str
    batch_size: int = 500


@dataclass(frozen=True)
class RebuildProjectionResult:
    rebuilt: int
    batches: int


def rebuild_workflow_id(tenant_id: str) -> str:
    return f"projection-rebuild-{tenant_id}"


@workflow.defn(name="RebuildProjection")
class RebuildProjectionWorkflow:
    def __init__(self) -> None:
        self._rebuilt = 0

    @workflow.run
    async def run(self, request: RebuildProjectionInput) -> RebuildProjectionResult:
        after: str | None = None
        batches = 0
        while True:
            result = await workflow.execute_activity_method(
                ProjectionActivities.rebuild_projection_batch,
                RebuildBatchInput(request.tenant_id, after, request.batch_size),
                start_to_close_timeout=timedelta(minutes=5),
            )
            if result.rebuilt == 0:
                return RebuildProjectionResult(rebuilt=self._rebuilt, batches=batches)
            batches += 1
            self._rebuilt += result.rebuilt
            after = result.last_memory_id

    @workflow.query
    def rebuilt(self) -> int:
        return self._rebuilt
