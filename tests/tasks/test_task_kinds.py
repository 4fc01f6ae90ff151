"""What the engine does with a step of a pinned definition that this worker cannot run: it fails the task with a
code saying so, or waits for a worker that can, never hangs silently."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from temporalio.client import WorkflowHandle

from activities.tasks.faults import FaultPlan
from api.settings import Settings
from memory.tasks import registry
from memory.tasks.contract import ProducedArtifact, StepContext, StepOutcome
from memory.tasks.keys import workflow_id
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.tasks.conftest import own_worker
from workflows.report_task import ReportTaskInput, ReportTaskWorkflow

GOAL_SCHEMA = {"type": "object"}


def _body(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"version": "1", "goal_schema": GOAL_SCHEMA, "steps": list(steps)}


@asynccontextmanager
async def _started(settings: Settings, engine: Engine, make_key: MakeKey, body: dict[str, Any],
                   tenant: str | None = None, goal: dict[str, Any] | None = None,
                   ) -> AsyncIterator[WorkflowHandle[Any, Any]]:
    """A task of alice's in ``tenant`` (default: a fresh one) running ``body``, on a worker of the test's own while
    the block runs."""
    if tenant is None:
        tenant = f"t-{uuid.uuid4().hex[:12]}"
        make_key(tenant=tenant)
    task_id = f"task-{uuid.uuid4().hex[:8]}"
    async with own_worker(settings, engine, threads=2, faults=FaultPlan()) as (client, queue):
        yield await client.start_workflow(
            ReportTaskWorkflow.run,
            ReportTaskInput(tenant, task_id, "alice", "kinds", goal or {}, "intent", definition=body,
                            step_retry_max_interval_seconds=0.5),
            id=workflow_id(tenant, task_id), task_queue=queue,
        )


async def _run(settings: Settings, engine: Engine, make_key: MakeKey, body: dict[str, Any]) -> Any:
    async with _started(settings, engine, make_key, body) as handle:
        return await asyncio.wait_for(handle.result(), 60)


async def test_an_llm_step_on_a_worker_without_an_endpoint_fails_the_task_saying_what_to_set(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """The API refuses such a definition at PUT when it has no endpoint; a worker configured apart from its API
    fails the task at once with the settings to give it, never retries a call it cannot make."""
    step = {"step_id": "ask", "kind": "llm", "prompt": "Summarise {{goal.topic}}"}
    state = await _run(settings, engine, make_key, _body(step, {"step_id": "send", "kind": "publish",
                                                               "destination": "reports"}))
    assert (state.status, state.error["code"]) == ("FAILED", "llm_endpoint_not_configured")
    assert "MNEMO_LLM_BASE_URL" in state.error["message"]


async def test_a_definition_that_never_publishes_fails_instead_of_succeeding(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """A task succeeds only once a destination confirmed its result (the status machine's guard)."""
    name = f"kinds-{uuid.uuid4().hex[:6]}.only"
    registry.declare_function(name, lambda ctx: StepOutcome({"done": True}))
    state = await _run(settings, engine, make_key, _body({"step_id": "only", "kind": "compute", "function": name}))
    assert (state.status, state.error["code"], state.completed_step_ids) == ("FAILED", "no_publication", ["only"])


async def test_a_step_whose_function_is_not_loaded_waits_for_a_worker_that_has_it(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """Retried, not failed: once a worker that loaded the function takes the step, the task goes on."""
    name = f"late-{uuid.uuid4().hex[:6]}.draft"

    def draft(ctx: StepContext) -> StepOutcome:
        return StepOutcome({}, [ProducedArtifact("draft.txt", "draft", "text/plain", b"late but there")])

    body = {**_body({"step_id": "draft", "kind": "compute", "function": name},
                    {"step_id": "review", "kind": "approval", "artifact_from": "draft/draft.txt"},
                    {"step_id": "send", "kind": "publish", "destination": "reports"}),
            "redraft_step": "draft"}
    async with _started(settings, engine, make_key, body) as handle:
        for _ in range(100):
            pending = (await handle.describe()).raw_description.pending_activities
            if pending and pending[0].attempt >= 3:
                break
            await asyncio.sleep(0.1)
        assert pending[0].last_failure.application_failure_info.type == "unknown_step"
        state = await handle.query(ReportTaskWorkflow.state)
        assert state is not None and state.status == "RUNNING"
        registry.declare_function(name, draft)
        for _ in range(200):
            state = await handle.query(ReportTaskWorkflow.state)
            if state is not None and state.status != "RUNNING":
                break
            await asyncio.sleep(0.1)
        assert state is not None and state.status == "WAITING_FOR_APPROVAL", state
        assert state.completed_step_ids == ["draft"] and state.current_step_id == "review"
        await handle.terminate("test over")


async def test_a_compute_step_with_a_recall_gets_the_owners_bundle(
    settings: Settings, engine: Engine, make_key: MakeKey, client: TestClient
) -> None:
    """The recall's query quotes the goal; the bundle is alice's (not another user's of the tenant), as prompt text
    and as memories."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alice, carol = make_key(tenant=tenant), make_key(tenant=tenant, user="carol")
    for key, content in ((alice, "checkout runbook: restart the payment proxy first"),
                         (carol, "checkout runbook: carol's private note")):
        response = client.post("/memory-candidates", json=candidate(content), headers=auth(key))
        assert response.status_code == 201, response.text
    name = f"recall-{uuid.uuid4().hex[:6]}.gather"
    seen: list[Mapping[str, Any] | None] = []

    def gather(ctx: StepContext) -> StepOutcome:
        seen.append(ctx.bundle)
        return StepOutcome({}, [ProducedArtifact("notes.txt", "draft", "text/plain", b"notes")])

    registry.declare_function(name, gather)
    body = {**_body({"step_id": "gather", "kind": "compute", "function": name,
                     "recall": {"query": "{{goal.service}} runbook"}},
                    {"step_id": "review", "kind": "approval", "artifact_from": "gather/notes.txt"},
                    {"step_id": "send", "kind": "publish", "destination": "reports"}),
            "redraft_step": "gather"}
    async with _started(settings, engine, make_key, body, tenant, {"service": "checkout"}) as handle:
        for _ in range(200):
            state = await handle.query(ReportTaskWorkflow.state)
            if state is not None and state.status in ("WAITING_FOR_APPROVAL", "FAILED"):
                break
            await asyncio.sleep(0.1)
        await handle.terminate("test over")
    assert state is not None and state.status == "WAITING_FOR_APPROVAL", state
    [bundle] = seen
    assert bundle is not None
    contents = [memory["content"] for memory in bundle["memories"]]
    assert contents == ["checkout runbook: restart the payment proxy first"]
    assert "<memory_bundle" in bundle["text"] and "restart the payment proxy first" in bundle["text"]
    assert bundle["trace_id"]
