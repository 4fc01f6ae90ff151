"""Report-task throughput against the machine's CPU bound, and per-step orchestration overhead, on the real stack.

Starts its own embedded PostgreSQL and Temporal dev server, seeds a small sales dataset, runs the worker as
``mnemo worker --processes N`` (default: one per core; its CPU pool renders the charts), then measures in one run:

1. baseline: a bare activity round trip (a workflow calling a no-op activity in sequence, worker in this process);
2. the CPU bound: ``--alone`` tasks one after another, each alone on the stack, and the CPU seconds every process
   of the stack spent meanwhile (this process — it plays the API: starts, approves — the worker processes and their
   pools, PostgreSQL, Temporal: utime + stime of each, children reaped meanwhile included, from /proc), less what
   the same processes spend idle over as long (measured just before); bound = cores ÷ CPU seconds per task;
3. one task alone, step by step: each step's engine cycle (checkpoint to checkpoint) minus the step function's own
   compute time (run directly, in-process, on the same inputs) — the per-step orchestration overhead, set against
   the baseline round trip;
4. N concurrent report tasks (default 200), each approved as soon as it waits: how many succeed, duplicate
   publications, heartbeat timeouts (from the workflow histories: attempts whose last failure, or whose final
   outcome, was a heartbeat timeout), step attempts retried, task durations, each step's cycle under load,
   tasks/second, and the CPU the stack used meanwhile (cores busy; CPU seconds per task under load).

``ratio = tasks_per_s / cpu_bound_tasks_per_s``; ``--json OUT`` writes every figure.

Run: ``.venv/bin/python -m bench.tasks_throughput [--tasks 200] [--processes N] [--json OUT]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType, TaskQueueType, TimeoutType
from temporalio.api.failure.v1 import Failure
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from api.devstack.postgres import EmbeddedPostgres
from api.devstack.processes import children, free_port, proc_stats
from api.devstack.temporal import TemporalDevServer
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
    url: str
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
        yield Stack(engine, info.url(), temporal.address, workdir / "data", tenant)
        engine.dispose()
    finally:
        temporal.stop()
        postgres.stop()


TICK = os.sysconf("SC_CLK_TCK")


def cpu_by_process(root: int) -> dict[int, float]:
    """CPU seconds so far of ``root`` and each process below it: its utime + stime, plus cutime + cstime (its
    children already reaped). Zombies count (their time is not yet their parent's)."""
    table = {int(entry.name): fields for entry, fields in proc_stats(zombies=True)}
    below: dict[int, list[int]] = {}
    for pid, fields in table.items():
        below.setdefault(int(fields[1]), []).append(pid)
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            found[pid] = sum(int(v) for v in table[pid][11:15]) / TICK
        todo.extend(below.get(pid, []))
    return found


def stack_cpu() -> dict[str, float]:
    """CPU seconds so far of the whole stack, by part: this process (the bench: it starts and approves, as the API
    would), and the trees of its children — PostgreSQL, Temporal, the worker processes with their CPU pools."""
    me = os.getpid()
    parts = {"bench": sum(int(v) for v in next(f for e, f in proc_stats() if int(e.name) == me)[11:15]) / TICK}
    for child in children(me):
        name = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        part = "postgres" if "postgres" in name else "temporal" if "temporal" in name else "worker" \
            if "api.cli" in name else "other"
        parts[part] = parts.get(part, 0.0) + sum(cpu_by_process(child).values())
    return parts


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {part: after.get(part, 0.0) - before.get(part, 0.0) for part in after}


@contextmanager
def worker_processes(s: Stack, queue: str, processes: int, threads: int | None, log: Path) -> Iterator[None]:
    """``mnemo worker --processes N`` on ``queue`` against the stack, as deployed (CPU pools included; the
    caller's MNEMO_CPU_POOL_IDLE passes through); SIGTERM after."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_DATABASE_URL=s.url, MNEMO_TEMPORAL_ADDRESS=s.address, MNEMO_TEMPORAL_NAMESPACE="mnemo",
               MNEMO_TASK_QUEUE=queue, MNEMO_DATA_DIR=str(s.data_dir), MNEMO_LOG_LEVEL="warning",
               MNEMO_CPU_POOL_IDLE=os.environ.get("MNEMO_CPU_POOL_IDLE", "true"))
    if threads is not None:
        env["MNEMO_WORKER_ACTIVITY_SLOTS"] = str(threads)
    with log.open("ab") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "api.cli", "worker", "--processes", str(processes)],
                                env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(90)


async def pollers(client: Client, queue: str) -> set[int]:
    """The pids of the worker processes polling ``queue`` for activities (the SDK's identity is ``pid@host``)."""
    described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    ))
    return {int(poller.identity.split("@", 1)[0]) for poller in described.pollers}


def _heartbeat_timeout(failure: Failure) -> bool:
    while True:
        if failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT:
            return True
        if not failure.HasField("cause"):
            return False
        failure = failure.cause


async def heartbeat_timeouts(client: Client, tenant: str, ids: list[str]) -> int:
    """Heartbeat timeouts in the tasks' workflow histories: activities started again after one (the started event
    of a retried activity carries its last failure) and activities that ended on one."""
    count = 0
    for task_id in ids:
        history = await client.get_workflow_handle(workflow_id(tenant, task_id)).fetch_history()
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = event.activity_task_started_event_attributes
                count += started.attempt > 1 and _heartbeat_timeout(started.last_failure)
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
                count += _heartbeat_timeout(event.activity_task_timed_out_event_attributes.failure)
    return count


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


async def _alone(s: Stack, client: Client, queue: str, count: int, idle_seconds: float) -> dict[str, Any]:
    """The stack's CPU per task alone: ``count`` tasks one after another, less the idle rate measured just before."""
    idle_before, began = stack_cpu(), time.perf_counter()
    await asyncio.sleep(idle_seconds)
    idle = cpu_delta(idle_before, stack_cpu())
    idle_rate = sum(idle.values()) / (time.perf_counter() - began)
    before, began = stack_cpu(), time.perf_counter()
    ids = []
    for n in range(count):
        _, [single] = await _run_tasks(s, client, queue, 1, f"alone-{n}")
        if single.status != "SUCCEEDED":
            raise RuntimeError(f"a task alone did not succeed: {single!r}")
        ids.append(single.task_id)
    elapsed = time.perf_counter() - began
    used = cpu_delta(before, stack_cpu())
    raw = sum(used.values()) / count
    return {"ids": ids, "seconds_per_task": elapsed / count, "idle_cores": idle_rate,
            "cpu_s_per_task_raw": raw, "cpu_s_per_task": raw - idle_rate * elapsed / count,
            "by_part": {part: value / count for part, value in used.items()}}


async def measure(s: Stack, tasks: int, processes: int, threads: int | None, heartbeat: float, alone: int,
                  log: Path) -> dict[str, Any]:
    client = await Client.connect(s.address, namespace="mnemo")
    queue = f"bench-{uuid.uuid4().hex[:6]}"
    with ThreadPoolExecutor(max_workers=4) as executor:
        async with round_trip_worker(client, queue + "-noop", executor):
            round_trip = await bare_round_trip(client, queue + "-noop")
    say(f"baseline measured ({round_trip * 1000:.1f} ms)")
    cores = os.cpu_count() or 1
    with worker_processes(s, queue, processes, threads, log):
        deadline = time.monotonic() + 180
        while len(await pollers(client, queue)) < processes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{processes} worker processes did not poll {queue} within 180 s; see {log}")
            await asyncio.sleep(0.5)
        await _run_tasks(s, client, queue, 4 * processes, "warm-up")  # imports, pools, caches in every process
        single = await _alone(s, client, queue, alone, idle_seconds=5.0)
        cycles = _step_cycles(s, single["ids"][-1])
        direct = _direct_compute(s, single["ids"][-1])
        bound = cores / single["cpu_s_per_task"]
        say(f"alone: {single['cpu_s_per_task']:.3f} CPU s per task → CPU bound {bound:.2f} tasks/s on {cores} cores")
        say(f"starting {tasks} tasks ({processes} worker processes)")
        before = stack_cpu()
        elapsed, results = await _run_tasks(s, client, queue, tasks, "load", heartbeat)
        used = cpu_delta(before, stack_cpu())
        figures = _load_figures(s, "load", tasks, elapsed, results)
    ids = [task_id_for(s.tenant, "alice", f"load-{n}") for n in range(tasks)]
    timeouts = await heartbeat_timeouts(client, s.tenant, ids)
    with tenant_session(s.engine, s.tenant) as session:
        published, duplicates = session.execute(
            text(
                "SELECT count(*), count(*) - count(DISTINCT task_id) FROM task_operations WHERE status = 'SUCCEEDED'"
            )
        ).one()
    rate = figures["succeeded"] / elapsed
    report = {
        "tasks": tasks, "processes": processes, "cores": cores,
        "succeeded": figures["succeeded"], "failed": tasks - figures["succeeded"],
        "duplicate_publications": duplicates, "publications": published, "heartbeat_timeouts": timeouts,
        "retried_attempts": figures["retried"], "tasks_per_s": rate, "cpu_bound_tasks_per_s": bound,
        "ratio": rate / bound, "round_trip_ms": round_trip * 1000,
        "alone": {k: v for k, v in single.items() if k != "ids"},
        "load": {"elapsed_s": elapsed, "cores_busy": sum(used.values()) / elapsed,
                 "cpu_s_per_task": sum(used.values()) / max(1, figures["succeeded"]),
                 "by_part": {part: value / max(1, figures["succeeded"]) for part, value in used.items()},
                 "load_average": figures["load"]},
        "steps": {step: {"cycle_ms": cycles[step] * 1000, "compute_ms": direct[step] * 1000}
                  for step in COMPUTE_STEPS},
    }
    _print(report, figures)
    return report


def _print(r: dict[str, Any], figures: dict[str, Any]) -> None:
    say("\n== baseline (same run) ==")
    say(f"bare activity round trip (no-op activity, sequential): {r['round_trip_ms']:.1f} ms")
    a = r["alone"]
    say("\n== one report task alone (the CPU bound) ==")
    say(f"{a['seconds_per_task']:.2f} s per task end to end; stack CPU {a['cpu_s_per_task_raw']:.3f} s per task, "
        f"less idle {a['idle_cores']:.3f} cores → {a['cpu_s_per_task']:.3f} s")
    say("CPU s per task by part: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(a["by_part"].items())))
    say(f"CPU bound: {r['cores']} cores ÷ {a['cpu_s_per_task']:.3f} s = {r['cpu_bound_tasks_per_s']:.2f} tasks/s")
    say(f"{'step':<18} {'engine cycle':>12} {'step compute':>12} {'overhead':>10} {'÷ round trip':>12}")
    for step, t in r["steps"].items():
        overhead = t["cycle_ms"] - t["compute_ms"]
        say(f"{step:<18} {t['cycle_ms']:>10.1f}ms {t['compute_ms']:>10.1f}ms {overhead:>8.1f}ms "
            f"{overhead / r['round_trip_ms']:>11.1f}×")
    _print_load(figures, f"{r['processes']} worker processes")
    load = r["load"]
    say(f"stack CPU under load: {load['cores_busy']:.2f} cores busy, {load['cpu_s_per_task']:.3f} CPU s per task ("
        + ", ".join(f"{k} {v:.3f}" for k, v in sorted(load["by_part"].items())) + ")")
    say(f"heartbeat timeouts (workflow histories) {r['heartbeat_timeouts']}; publications {r['publications']}, "
        f"duplicates {r['duplicate_publications']} (warm-ups and tasks alone included)")
    say(f"\nsucceeded {r['succeeded']}, failed {r['failed']}: {r['tasks_per_s']:.3f} tasks/s against the CPU bound "
        f"{r['cpu_bound_tasks_per_s']:.3f} → ratio {r['ratio']:.2f}")
    share, efficiency = load["cores_busy"] / r["cores"], r["alone"]["cpu_s_per_task"] / load["cpu_s_per_task"]
    say(f"ratio = share of the cores the stack got under load ({share:.2f}) × CPU per task alone ÷ under load "
        f"({efficiency:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--lines", type=int, default=2_400, help="sales lines in the benchmark's dataset")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="mnemo worker --processes N")
    parser.add_argument("--threads", type=int, default=None,
                        help="activity slots per worker process (default: MNEMO_WORKER_ACTIVITY_SLOTS's)")
    parser.add_argument("--heartbeat", type=float, default=30.0, help="step heartbeat timeout, seconds")
    parser.add_argument("--alone", type=int, default=5, help="tasks run one at a time for the CPU bound")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as tmp, stack(Path(tmp), args.lines) as s:
        say(f"stack ready: Temporal {s.address}, {args.lines} sales lines, {args.tasks} tasks")
        report = asyncio.run(measure(s, args.tasks, args.processes, args.threads, args.heartbeat, args.alone,
                                     Path(tmp) / "worker.log"))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
