"""Report-task throughput and per-step orchestration overhead, on the real stack.

Starts its own embedded PostgreSQL and Temporal dev server, seeds a small sales
dataset, then measures in one run:

1. baseline: a bare activity round trip (a workflow calling a no-op activity in sequence);
2. one report task alone: each step's engine cycle (checkpoint to checkpoint) minus the
   step function's own compute time (run directly, in-process, on the same inputs) —
   the per-step orchestration overhead, set against the baseline round trip;
3. N concurrent report tasks (default 200), each approved as soon as it waits: how many
   succeed, how many step attempts were retried (a heartbeat timeout, say), each task's
   duration (start to SUCCEEDED, p50/p95), each step's engine cycle under load (p50/p95),
   tasks/second.

``--compare`` runs phase 3 twice in the same run on the same stack, first with the worker as it
was before issue 12 (the SDK's default of 100 activity slots in front of the executor's few
threads: an activity accepted beyond the threads waits in the executor's queue, unable to
heartbeat), then as ``build_worker`` builds it now (slots = threads). Both use the same
executor, step heartbeat timeout (``--heartbeat``, the workflow's default 30 s) and data.

Run: ``.venv/bin/python -m bench.tasks_throughput [--tasks 200] [--lines 2400] [--compare]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.stores import default_destinations
from api.devstack.postgres import EmbeddedPostgres
from api.devstack.processes import free_port
from api.devstack.temporal import TemporalDevServer
from api.worker import build_worker
from bench.harness import make_key, percentile, say, seed_sales_data
from memory.artifact_store import read
from memory.artifact_store.postgres import PostgresArtifactStore
from memory.db import make_engine, tenant_session
from memory.tasks import registry
from memory.tasks.artifacts import task_store
from memory.tasks.contract import StepContext
from memory.tasks.keys import task_id_for, workflow_id
from memory.tasks.live import ApprovalDecision
from migrations import upgrade
from workflows.report_task import ReportTaskInput, ReportTaskWorkflow

COMPUTE_STEPS = ["load_data", "validate_data", "calculate_metrics", "generate_charts", "generate_draft"]


@activity.defn(name="bench_noop")
def noop(value: int) -> int:
    return value


@workflow.defn(name="BenchRoundTrips", sandboxed=False)
class RoundTrips:
    @workflow.run
    async def run(self, count: int) -> int:
        total = 0
        for n in range(count):
            total += await workflow.execute_activity(noop, n, start_to_close_timeout=timedelta(seconds=30))
        return total


def round_trip_worker(client: Client, queue: str, executor: ThreadPoolExecutor) -> Worker:
    """The worker of the baseline: :class:`RoundTrips` and its no-op activity, nothing else, on ``queue``."""
    return Worker(client, task_queue=queue, workflows=[RoundTrips], activities=[noop], activity_executor=executor,
                  workflow_runner=UnsandboxedWorkflowRunner())


async def bare_round_trip(client: Client, queue: str, rounds: int = 50) -> float:
    """Seconds per bare activity round trip (the engine's floor every step pays), on ``queue`` served by
    :func:`round_trip_worker`; after a warm-up. Checked to be what it claims, or it raises: the measured workflow's
    history holds exactly ``rounds`` activities scheduled and completed, one at a time, and their results add up."""
    await client.execute_workflow(RoundTrips.run, 5, id=f"warm-{uuid.uuid4()}", task_queue=queue)
    handle = await client.start_workflow(RoundTrips.run, rounds, id=f"rt-{uuid.uuid4()}", task_queue=queue)
    began = time.perf_counter()
    total = await handle.result()
    elapsed = time.perf_counter() - began
    pair = [EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    seen = [event.event_type for event in (await handle.fetch_history()).events if event.event_type in pair]
    if total != rounds * (rounds - 1) // 2 or seen != pair * rounds:
        raise RuntimeError(f"the baseline did not run {rounds} no-op activities one after another: result {total}, "
                           f"activity events {[EventType.Name(kind) for kind in seen][:6]}…")
    return elapsed / rounds


@dataclass
class Stack:
    engine: Engine
    address: str
    data_dir: Path
    tenant: str


@contextmanager
def stack(workdir: Path, lines: int) -> Any:
    postgres = EmbeddedPostgres(workdir / "pg", port=free_port())
    temporal = TemporalDevServer(workdir / "temporal", port=free_port(), ui_port=None, namespace="mnemo")
    temporal.start()
    info = postgres.start()
    try:
        upgrade(info.url())
        temporal.wait_ready()
        engine = make_engine(info.url(), pool_size=20)
        tenant = "bench"
        make_key(info.url(), tenant, "alice", ["memory_writer"])
        make_key(info.url(), tenant, "bob", ["approver"])
        seed_sales_data(info.url(), tenant, lines)
        yield Stack(engine, temporal.address, workdir / "data", tenant)
        engine.dispose()
    finally:
        temporal.stop()
        postgres.stop()


async def _approve_when_waiting(s: Stack, client: Client, pending: set[str]) -> None:
    """The approver: one read-model query per tick finds every waiting task; each is approved once."""
    while pending:
        with tenant_session(s.engine, s.tenant) as session:
            rows = session.execute(
                text("SELECT task_id, state_version, draft_sha256 FROM tasks WHERE status = 'WAITING_FOR_APPROVAL'")
            ).all()
        for task_id, version, sha in rows:
            if task_id in pending:
                handle = client.get_workflow_handle(workflow_id(s.tenant, task_id))
                try:
                    await handle.execute_update(
                        ReportTaskWorkflow.decide, ApprovalDecision("approve", sha, version, "bob", ["approver"])
                    )
                except (WorkflowUpdateFailedError, RPCError, WorkflowUpdateRPCTimeoutOrCancelledError):
                    continue  # the read model is a moment ahead of the workflow (or Temporal is busy): next tick
                pending.discard(task_id)
        await asyncio.sleep(0.05)


async def _run_tasks(
    s: Stack, client: Client, queue: str, count: int, label: str, heartbeat: float = 30.0
) -> tuple[float, list[Any]]:
    ids = [task_id_for(s.tenant, "alice", f"{label}-{n}") for n in range(count)]
    began = time.perf_counter()
    handles = await asyncio.gather(
        *[
            client.start_workflow(
                ReportTaskWorkflow.run,
                ReportTaskInput(
                    s.tenant, task_id, "alice", "monthly-report", {"month": "2026-06", "currency": "CNY"},
                    f"{label}-{n}",
                    step_heartbeat_seconds=heartbeat,
                ),
                id=workflow_id(s.tenant, task_id),
                task_queue=queue,
            )
            for n, task_id in enumerate(ids)
        ]
    )
    pending = set(ids)
    approver = asyncio.create_task(_approve_when_waiting(s, client, pending))
    results = await asyncio.gather(*[h.result() for h in handles], return_exceptions=True)
    elapsed = time.perf_counter() - began
    pending.clear()  # failed tasks never wait for approval
    await approver
    return elapsed, results


def checkpoint_times(engine: Engine, tenant: str, task_id: str) -> list[tuple[str, datetime]]:
    """The task's checkpoints in order, each its reason (``step_succeeded:<step>``, …) and the database's time."""
    with tenant_session(engine, tenant) as session:
        rows = session.execute(
            text("SELECT reason, created_at FROM task_checkpoints WHERE task_id = :t ORDER BY state_version"),
            {"t": task_id},
        ).all()
    return [(str(reason), at) for reason, at in rows]


def _step_cycles(s: Stack, task_id: str) -> dict[str, float]:
    """Seconds from the previous checkpoint to each step's success checkpoint (the engine's full cycle)."""
    cycles = {}
    for (_, before), (reason, after) in itertools.pairwise(checkpoint_times(s.engine, s.tenant, task_id)):
        if reason.startswith("step_succeeded:"):
            cycles[reason.split(":", 1)[1]] = (after - before).total_seconds()
    return cycles


def _direct_compute(s: Stack, task_id: str, repeats: int = 3) -> dict[str, float]:
    """Each step function alone, on the inputs the task used: no Temporal, no read-model writes."""
    with tenant_session(s.engine, s.tenant) as session:
        outputs: dict[str, dict[str, Any]] = dict(
            session.execute(
                text("SELECT step_id, output FROM task_steps WHERE task_id = :t AND status = 'SUCCEEDED'"),
                {"t": task_id},
            ).all()
        )
    store = task_store(PostgresArtifactStore(s.engine))
    timings = {}
    for step in COMPUTE_STEPS:
        ctx = StepContext(
            s.tenant, task_id, "monthly-report", {"month": "2026-06", "currency": "CNY"}, "v1",
            {k: v for k, v in outputs.items() if COMPUTE_STEPS.index(k) < COMPUTE_STEPS.index(step)}
            if step in COMPUTE_STEPS else {},
            {}, lambda: tenant_session(s.engine, s.tenant), lambda sha: read(store, sha), lambda: None,
        )
        registry.load()
        fn = registry.function(registry.hook_name("monthly-report", step))
        samples = []
        for _ in range(repeats):
            began = time.perf_counter()
            fn(ctx)
            samples.append(time.perf_counter() - began)
        timings[step] = statistics.median(samples)
    return timings


def _load_figures(s: Stack, label: str, tasks: int, elapsed: float, results: list[Any]) -> dict[str, Any]:
    """What one load phase did, from the read model: retries, task durations, step cycles."""
    ids = [task_id_for(s.tenant, "alice", f"{label}-{n}") for n in range(tasks)]
    succeeded = sum(1 for r in results if not isinstance(r, BaseException) and r.status == "SUCCEEDED")
    failures = [r for r in results if isinstance(r, BaseException) or r.status != "SUCCEEDED"]
    with tenant_session(s.engine, s.tenant) as session:
        retried, failed_attempts = session.execute(
            text(
                "SELECT count(*) FILTER (WHERE temporal_attempt > 1), count(*) FILTER (WHERE status <> 'SUCCEEDED') "
                "FROM task_attempts WHERE task_id = ANY(:ids)"
            ),
            {"ids": ids},
        ).one()
        durations = [
            row[0]
            for row in session.execute(
                text(
                    "SELECT extract(epoch FROM max(created_at) - min(created_at)) FROM task_checkpoints "
                    "WHERE task_id = ANY(:ids) GROUP BY task_id"
                ),
                {"ids": ids},
            )
        ]
    cycles: dict[str, list[float]] = {step: [] for step in COMPUTE_STEPS}
    for task_id in ids:
        for step, seconds in _step_cycles(s, task_id).items():
            if step in cycles:
                cycles[step].append(seconds)
    return {
        "label": label, "tasks": tasks, "succeeded": succeeded, "failures": failures, "elapsed": elapsed,
        "retried": retried, "failed_attempts": failed_attempts, "durations": [float(d) for d in durations],
        "cycles": cycles, "load": os.getloadavg()[0],
    }


def _print_load(f: dict[str, Any], title: str) -> None:
    say(f"\n== {f['tasks']} concurrent report tasks: {title} ==")
    if f["failures"]:
        say(f"not succeeded: {len(f['failures'])} (first: {f['failures'][0]!r})")
    say(
        f"succeeded {f['succeeded']}/{f['tasks']}; step attempts retried (Temporal attempt > 1) {f['retried']}, "
        f"attempts not succeeded {f['failed_attempts']}"
    )
    d = f["durations"]
    say(f"task duration (first to last checkpoint): p50 {percentile(d, 0.5):.1f} s, "
        f"p95 {percentile(d, 0.95):.1f} s, max {max(d):.1f} s")
    say(f"{'step':<18} {'cycle p50':>10} {'cycle p95':>10}")
    for step, values in f["cycles"].items():
        say(f"{step:<18} {percentile(values, 0.5):>9.2f}s {percentile(values, 0.95):>9.2f}s")
    say(f"wall time {f['elapsed']:.1f} s → {f['succeeded'] / f['elapsed']:.2f} tasks/s; load average {f['load']:.2f}")


async def measure(s: Stack, tasks: int, compare: bool, threads: int, heartbeat: float) -> None:
    client = await Client.connect(s.address, namespace="mnemo")
    queue = f"bench-{uuid.uuid4().hex[:6]}"
    phases: list[tuple[str, int | None]] = [("before", 100)] if compare else []
    phases.append(("now", None))
    # Activity threads beyond a few only contend for the GIL on a small machine (2 cores here).
    with ThreadPoolExecutor(max_workers=threads) as executor:
        baseline_worker = round_trip_worker(client, queue + "-noop", executor)
        loads = []
        async with baseline_worker:
            round_trip = await bare_round_trip(client, queue + "-noop")
            say(f"baseline measured ({round_trip * 1000:.1f} ms)")
            for index, (label, slots) in enumerate(phases):
                phase_queue = f"{queue}-{label}"
                # "before": the SDK's default slots (100) in front of the executor's threads, as build_worker was.
                worker = build_worker(
                    client, s.engine, phase_queue, executor, artifacts=PostgresArtifactStore(s.engine),
                    destinations=default_destinations(s.engine, PostgresArtifactStore(s.engine)), activity_slots=slots,
                )
                async with worker:
                    if index == len(phases) - 1:
                        await _run_tasks(s, client, phase_queue, 1, "warm-up")  # imports, pools and caches
                        alone, [single] = await _run_tasks(s, client, phase_queue, 1, "alone")
                        cycles = _step_cycles(s, single.task_id)
                        direct = _direct_compute(s, single.task_id)
                        say(f"single task measured ({alone:.2f} s)")
                    elif index == 0:
                        await _run_tasks(s, client, phase_queue, 1, f"warm-up-{label}")
                    say(f"starting {tasks} tasks ({label}: {slots or threads} activity slots, {threads} threads)")
                    elapsed, results = await _run_tasks(s, client, phase_queue, tasks, f"load-{label}", heartbeat)
                    loads.append((label, slots, _load_figures(s, f"load-{label}", tasks, elapsed, results)))

    with tenant_session(s.engine, s.tenant) as session:
        published, duplicates = session.execute(
            text(
                "SELECT count(*), count(*) - count(DISTINCT task_id) FROM task_operations WHERE status = 'SUCCEEDED'"
            )
        ).one()
    say("\n== baseline (same run) ==")
    say(f"bare activity round trip (no-op activity, sequential): {round_trip * 1000:.1f} ms")
    say("\n== one report task alone ==")
    say(f"end to end incl. approval + publish: {alone:.2f} s")
    say(f"{'step':<18} {'engine cycle':>12} {'step compute':>12} {'overhead':>10} {'÷ round trip':>12}")
    overheads = []
    for step in COMPUTE_STEPS:
        overhead = cycles[step] - direct[step]
        overheads.append(overhead)
        say(f"{step:<18} {cycles[step] * 1000:>10.1f}ms {direct[step] * 1000:>10.1f}ms "
            f"{overhead * 1000:>8.1f}ms {overhead / round_trip:>11.1f}×")
    mean = statistics.mean(overheads)
    say(f"mean per-step orchestration overhead: {mean * 1000:.1f} ms = "
        f"{mean / round_trip:.1f}× a bare activity round trip")
    for label, slots, figures in loads:
        title = (f"{label}, {slots or threads} activity slots on {threads} threads, "
                 f"step heartbeat timeout {heartbeat:g} s")
        _print_load(figures, title)
    if len(loads) == 2:
        (_, _, b), (_, _, n) = loads
        say(
            f"\nnow / before: task p95 {percentile(n['durations'], 0.95) / percentile(b['durations'], 0.95):.2f}×, "
            f"throughput {(n['succeeded'] / n['elapsed']) / (b['succeeded'] / b['elapsed']):.2f}×"
        )
    say(f"publications recorded {published}, duplicates {duplicates} (all phases, warm-ups included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--lines", type=int, default=2_400, help="sales lines in the benchmark's dataset")
    parser.add_argument("--compare", action="store_true", help="first a load phase with the old unbounded slots")
    parser.add_argument("--threads", type=int, default=4, help="activity threads of the worker")
    parser.add_argument("--heartbeat", type=float, default=30.0, help="step heartbeat timeout, seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as tmp, stack(Path(tmp), args.lines) as s:
        say(f"stack ready: Temporal {s.address}, {args.lines} sales lines, {args.tasks} tasks")
        asyncio.run(measure(s, args.tasks, args.compare, args.threads, args.heartbeat))


if __name__ == "__main__":
    main()
