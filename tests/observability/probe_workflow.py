"""A workflow of three workflow tasks for the worker-log test; a module of its own, so the sandbox imports nothing
else of the tests."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow


@dataclass(frozen=True)
class Tenanted:
    tenant_id: str
    wait_seconds: float = 0.05


@workflow.defn(name="LogProbe")
class LogProbe:
    """Two timers: with no workflow cache, each later task replays the history before it; a long second timer
    keeps the workflow open when its worker stops."""

    @workflow.run
    async def run(self, tenant: Tenanted) -> str:
        await workflow.sleep(0.05)
        await workflow.sleep(tenant.wait_seconds)
        return tenant.tenant_id
