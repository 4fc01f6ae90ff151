"""The agent protocol as MCP tools (issue 26, item 2), so an MCP-speaking agent performs its steps: each tool
takes the REST body's fields (and the path's ids) and calls the very service function the REST route calls
(:mod:`api.services.task_attempts`), answering the same model. Internal keys only (a ``public_client`` key is not
offered them); who calls comes from the key, never from an argument."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from api.deps import app_temporal
from api.mcp.answers import answer
from api.mcp.auth import principal_of, request_of
from api.schemas import task_attempts as bodies
from api.schemas.tasks import Reason
from api.services import task_attempts
from api.services.client import ClientSource
from memory.tasks.leases import LEASE_DEFAULT, LEASE_MAX, LEASE_MIN

TASK_TOOLS = frozenset({"claim_task_step", "heartbeat_task_attempt", "complete_task_attempt", "fail_task_attempt"})
"""Offered to internal keys only."""

Id = Annotated[str, Field(min_length=1, max_length=64)]


def register(server: MCPServer[Any], state: State) -> None:
    """Add the agent protocol's tools to ``server``; ``state`` is the API's (engine, artifacts, Temporal)."""

    def temporal() -> ClientSource:
        return lambda: app_temporal(state)

    @server.tool(name="claim_task_step", description="Claim the step your task waits on for an agent (as POST "
                 "/tasks/{task_id}/attempts): an attempt holding it for lease_seconds, with the goal, the task's "
                 "artifacts so far and, after a rejection, its reason.")
    async def claim_task_step(
        ctx: Context[Any, Any], task_id: Id, step_id: bodies.StepId | None = None,
        lease_seconds: Annotated[int, Field(ge=LEASE_MIN, le=LEASE_MAX)] = LEASE_DEFAULT,
    ) -> Annotated[CallToolResult, bodies.ClaimOut]:
        given = {"lease_seconds": lease_seconds, **({"step_id": step_id} if step_id else {})}
        body = bodies.ClaimIn.model_validate(given)
        return await answer(lambda: run_in_threadpool(
            task_attempts.claim, state.engine, principal_of(request_of(ctx)), task_id, body))

    @server.tool(name="heartbeat_task_attempt", description="Renew your attempt's lease by the seconds it was "
                 "claimed for (as POST /tasks/{task_id}/attempts/{attempt_id}/heartbeat).")
    async def heartbeat_task_attempt(
        ctx: Context[Any, Any], task_id: Id, attempt_id: Id,
    ) -> Annotated[CallToolResult, bodies.HeartbeatOut]:
        return await answer(lambda: run_in_threadpool(
            task_attempts.heartbeat, state.engine, principal_of(request_of(ctx)), task_id, attempt_id))

    @server.tool(name="complete_task_attempt", description="Deliver the step's artifacts (base64) and output (as "
                 "POST .../complete); the same call again is answered as before (replayed: true).")
    async def complete_task_attempt(
        ctx: Context[Any, Any], task_id: Id, attempt_id: Id, artifacts: list[bodies.ArtifactIn],
        output: dict[str, Any] | None = None,
    ) -> Annotated[CallToolResult, bodies.CompleteOut]:
        body = bodies.CompleteIn(artifacts=artifacts, output=output or {})
        return await answer(lambda: task_attempts.complete(
            state.engine, temporal(), state.artifacts, principal_of(request_of(ctx)), task_id, attempt_id, body))

    @server.tool(name="fail_task_attempt", description="The step could not be done (as POST .../fail): retryable, "
                 "it may be claimed again (up to 5 failures); otherwise the task fails.")
    async def fail_task_attempt(
        ctx: Context[Any, Any], task_id: Id, attempt_id: Id, reason: Reason, retryable: bool,
    ) -> Annotated[CallToolResult, bodies.FailOut]:
        body = bodies.FailIn(reason=reason, retryable=retryable)
        return await answer(lambda: task_attempts.fail(
            state.engine, temporal(), principal_of(request_of(ctx)), task_id, attempt_id, body))
