"""Per-request costs for the capacity model (docs/scaling.md): CPU ms and I/O of one recall, memory write, session
commit, deletion and report task, split by process (API, PostgreSQL, worker, Temporal), on the real stack.

Starts the embedded stack (``mnemo dev --no-demo``'s processes) and measures, one operation at a time:

0. a warm-up in a tenant of its own (the query and passage embedding engines start: not measured), then
   **idle** (the same-run baseline): every process's CPU per second while nothing is asked (the embedding
   Schedule, Temporal's timers, pool pings). Each phase below subtracts this rate times its own duration, so a
   figure is what the operations added;
1. **memory write**: ``POST /memory-candidates`` (ACTIVE at once), until every vector is stored (the worker's
   embedding is part of a write's cost);
2. **recall**: ``POST /memory-query`` (hybrid, defaults) over the memories phase 1 wrote;
3. **session commit**: 10 messages posted, then a commit, until the commit's status is terminal;
4. **deletion**: ``DELETE /memories/{id}``, until the job is completed (purge, verification);
5. **report task**: a monthly report (small sales data) started, approved when it waits, until SUCCEEDED; per
   task and per step (its ``task_steps`` rows).

CPU is ``utime + stime`` (and the reaped children's ``cutime + cstime``) of each process tree from /proc, so a
PostgreSQL backend, an embedding engine child or a CPU-pool process counts for its parent. I/O is PostgreSQL's:
shared-buffer blocks hit and read (``pg_stat_database``), WAL bytes (``pg_stat_wal``), and the bytes the server's
processes wrote to storage (``/proc/<pid>/io``; a process that exited takes its count with it).

Usage: ``.venv/bin/python -m bench.capacity [--writes 200] [--recalls 200] [--commits 10] [--deletions 10]
[--tasks 3] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.corpus import base_texts, candidate, questions
from bench.harness import make_key, say, seed_sales_data, services, wait_for_vectors

TENANT = "capacity"
TICK = os.sysconf("SC_CLK_TCK")
IDLE_SECONDS = 30.0
POLL_SECONDS = 1.0
"""How often a commit's, a deletion's or a task's status is asked: those GETs are part of the API's figures."""
TERMINAL_COMMIT = {"completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion"}


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # after "pid (comm) "; fields[0] is the state
    return int(fields[1]), sum(int(value) for value in fields[11:15]) / TICK


def _written_bytes(pid: int) -> int:
    try:
        lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith("write_bytes:")), 0)


def _tree(root: int, parents: dict[int, int]) -> list[int]:
    members, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        members.extend(frontier)
    return members


@dataclass
class Sample:
    at: float
    cpu: dict[str, float]
    pg_written: int
    pg: dict[str, int]


@dataclass
class Meter:
    """CPU of each named process tree and PostgreSQL's I/O counters, sampled around a phase."""

    roots: dict[str, int]
    conninfo: str
    idle_rate: dict[str, float] = field(default_factory=dict)

    def sample(self) -> Sample:
        stats = {pid: stat for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if (stat := _stat(pid))}
        parents = {pid: stat[0] for pid, stat in stats.items()}
        trees = {name: _tree(root, parents) for name, root in self.roots.items()}
        cpu = {name: sum(stats[pid][1] for pid in pids if pid in stats) for name, pids in trees.items()}
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            row = conn.execute(
                "SELECT d.blks_hit, d.blks_read, d.xact_commit, w.wal_bytes::bigint, w.wal_records "
                "FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()").fetchone()
            conn.execute("SELECT pg_stat_clear_snapshot()")
        assert row is not None
        pg = dict(zip(("blks_hit", "blks_read", "xact_commit", "wal_bytes", "wal_records"), map(int, row), strict=True))
        return Sample(time.monotonic(), cpu, sum(_written_bytes(pid) for pid in trees["postgres"]), pg)

    @contextmanager
    def phase(self, label: str, count: Callable[[], int], results: dict[str, Any]) -> Iterator[None]:
        """Measure the block as ``count()`` operations: per operation, net of the idle rate."""
        time.sleep(2.0)  # let the previous phase's stragglers (a sweep, a commit's tail) finish
        before = self.sample()
        yield
        time.sleep(0.5)  # PostgreSQL's statistics are flushed by each backend at most once a second
        after = self.sample()
        seconds, n = after.at - before.at, count()
        cpu_ms = {name: 1000 * max(0.0, after.cpu[name] - before.cpu[name] - self.idle_rate.get(name, 0.0) * seconds)
                  / n for name in self.roots}
        io = {key: (after.pg[key] - before.pg[key]) / n for key in before.pg}
        io["disk_write_bytes"] = (after.pg_written - before.pg_written) / n
        results[label] = {"operations": n, "seconds": seconds, "cpu_ms": cpu_ms, "io": io,
                          "cpu_ms_total": sum(cpu_ms.values())}
        say(f"  ✓ {label}: {n} in {seconds:.1f}s; CPU ms per op " + ", ".join(
            f"{name} {value:.1f}" for name, value in cpu_ms.items())
            + f"; blocks hit {io['blks_hit']:.0f}, read {io['blks_read']:.1f}, WAL {io['wal_bytes'] / 1024:.1f} KiB")

    def measure_idle(self, seconds: float, results: dict[str, Any]) -> None:
        before = self.sample()
        time.sleep(seconds)
        after = self.sample()
        elapsed = after.at - before.at
        self.idle_rate = {name: (after.cpu[name] - before.cpu[name]) / elapsed for name in self.roots}
        results["idle"] = {"seconds": elapsed, "cpu_ms_per_s": {k: 1000 * v for k, v in self.idle_rate.items()}}
        say("  ✓ idle CPU ms/s: " + ", ".join(f"{k} {1000 * v:.1f}" for k, v in self.idle_rate.items()))


def _poll(client: httpx.Client, url: str, done: Callable[[dict[str, Any]], bool], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(url).raise_for_status().json()
        if done(body):
            return
        time.sleep(POLL_SECONDS)
    raise SystemExit(f"{url} did not finish in {timeout:.0f}s")


def writes(client: httpx.Client, texts: list[str]) -> list[str]:
    ids = []
    for i, text in enumerate(texts):
        answer = client.post("/memory-candidates", json=candidate(text, f"cap-{i}", idempotency_key=f"cap-{i}"))
        ids.append(answer.raise_for_status().json()["memory_id"])
    return ids


def recalls(client: httpx.Client, queries: list[str]) -> None:
    for query in queries:
        client.post("/memory-query", json={"query": query}).raise_for_status()


def commits(client: httpx.Client, texts: list[str], sessions: int) -> None:
    for s in range(sessions):
        session = f"cap-s{s}"
        client.post("/sessions", json={"session_id": session}).raise_for_status()
        messages = [{"idempotency_key": f"{session}-{i}", "role": "user" if i % 2 == 0 else "assistant",
                     "content": texts[(s * 10 + i) % len(texts)], "created_at": "2026-07-14T14:00:00+08:00"}
                    for i in range(10)]
        client.post(f"/sessions/{session}/messages", json={"messages": messages}).raise_for_status()
        client.post(f"/sessions/{session}/commit", json={"commit_id": "c1"}).raise_for_status()
        _poll(client, f"/sessions/{session}/commits/c1", lambda body: body["status"] in TERMINAL_COMMIT)


def deletions(client: httpx.Client, memory_ids: list[str]) -> None:
    for memory_id in memory_ids:
        job = client.delete(f"/memories/{memory_id}").raise_for_status().json()["job_id"]
        _poll(client, f"/memory-deletions/{job}", lambda body: body["status"] == "completed")


def tasks(owner: httpx.Client, approver: httpx.Client, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        task = owner.post("/tasks", json={"task_type": "monthly-report", "request_intent_id": uuid.uuid4().hex[:12],
                                          "goal": {"month": "2026-06", "currency": "CNY"}}).raise_for_status().json()
        url = f"/tasks/{task['task_id']}"
        _poll(owner, url, lambda view: view["status"] == "WAITING_FOR_APPROVAL")
        view = owner.get(url).json()
        approver.post(f"{url}/approvals", json={"decision": "approve", "state_version": view["state_version"],
                                                "artifact_sha256": view["pending_approval"]["artifact_sha256"]}
                      ).raise_for_status()
        _poll(owner, url, lambda view: view["status"] == "SUCCEEDED")
        ids.append(task["task_id"])
    return ids


def step_count(conninfo: str, task_ids: list[str]) -> int:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT count(*) FROM task_steps WHERE tenant_id = %s AND task_id = ANY(%s)",
                           (TENANT, task_ids)).fetchone()
    return int(row[0]) if row else 0


STORAGE = """
SELECT (SELECT sum(pg_column_size(m.*)) FROM memories m WHERE m.tenant_id = %(t)s),
       (SELECT sum(pg_column_size(s.*)) FROM memory_search s WHERE s.tenant_id = %(t)s),
       (SELECT sum(pg_column_size(p.*)) FROM memory_lexemes p WHERE p.tenant_id = %(t)s),
       (SELECT count(*) FROM memory_lexemes p WHERE p.tenant_id = %(t)s),
       (SELECT pg_relation_size('memory_search_embedding_384')::float
               / count(*) FILTER (WHERE vector_dims(embedding) = 384) FROM memory_search),
       (SELECT (pg_total_relation_size('memories') + pg_total_relation_size('memory_search')
                + pg_total_relation_size('memory_lexemes'))::float / count(*) FROM memory_search)
"""


def storage(conninfo: str, memories: int) -> dict[str, float]:
    """Bytes per memory: the rows of its three tables (heap, as stored: compressed or TOASTed values count as
    such), its entry of the 384-dimension HNSW index, and the three tables with every index and TOAST over every
    memory of the database (each index's first pages weigh on so few rows: an upper bound)."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(STORAGE, {"t": TENANT}).fetchone()
    assert row is not None
    heap = [float(value or 0) / memories for value in row[:4]]
    return {"memories_row": heap[0], "memory_search_row": heap[1], "postings": heap[2], "posting_count": heap[3],
            "hnsw_entry": float(row[4] or 0), "all_with_indexes": float(row[5] or 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--deletions", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    texts = base_texts(args.writes, seed=29)
    results: dict[str, Any] = {"cores": os.cpu_count()}
    with services("mnemo-bench-capacity-") as svc:
        stack = svc.stack
        if stack is None or stack.postgres.pid is None or stack.temporal.pid is None:
            raise SystemExit("bench.capacity measures the processes of the embedded stack it starts: "
                             "unset MNEMO_DATABASE_URL")
        roots = {"api": stack.children["api"].pid, "postgres": stack.postgres.pid,
                 "worker": stack.children["worker"].pid, "temporal": stack.temporal.pid}
        meter = Meter(roots, svc.conninfo)
        key = make_key(svc.sqlalchemy_url, TENANT, "u0", ["memory_writer"])
        approver_key = make_key(svc.sqlalchemy_url, TENANT, "approver", ["approver"])
        seed_sales_data(svc.sqlalchemy_url, TENANT, 2_400)
        with (httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client,
              httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {approver_key}"},
                           timeout=60) as approver):
            say("capacity: warm-up (the engines' child processes start, the first plans are made; not measured)")
            warm = make_key(svc.sqlalchemy_url, f"{TENANT}-warm-up", "u0", ["memory_writer"])
            warm_client = httpx.Client(base_url=svc.api_url, headers={"Authorization": f"Bearer {warm}"}, timeout=60)
            with warm_client:
                started = time.perf_counter()
                writes(warm_client, texts[:5])
                wait_for_vectors(svc.conninfo, f"{TENANT}-warm-up", 5, started, timeout=300)
                recalls(warm_client, questions(10))
            say(f"capacity: idle baseline ({IDLE_SECONDS:.0f}s)")
            meter.measure_idle(IDLE_SECONDS, results)
            say(f"capacity: {args.writes} memory writes, until every vector is stored")
            ids: list[str] = []
            with meter.phase("memory_write", lambda: len(ids), results):
                started = time.perf_counter()
                ids = writes(client, texts)
                wait_for_vectors(svc.conninfo, TENANT, len(ids), started, timeout=900)
            results["storage_bytes_per_memory"] = storage(svc.conninfo, len(ids))
            say("  ✓ bytes per memory: " + ", ".join(
                f"{k} {v:.0f}" for k, v in results["storage_bytes_per_memory"].items()))
            say(f"capacity: {args.recalls} recalls")
            with meter.phase("recall", lambda: args.recalls, results):
                recalls(client, (questions(36) * (args.recalls // 36 + 1))[:args.recalls])
            say(f"capacity: {args.commits} session commits of 10 messages")
            with meter.phase("session_commit", lambda: args.commits, results):
                commits(client, texts, args.commits)
            say(f"capacity: {args.deletions} deletions of one memory")
            with meter.phase("deletion", lambda: args.deletions, results):
                deletions(client, ids[:args.deletions])
            say(f"capacity: {args.tasks} report tasks")
            done: list[str] = []
            with meter.phase("report_task", lambda: len(done), results):
                done = tasks(client, approver, args.tasks)
            steps = step_count(svc.conninfo, done)
            task = results["report_task"]
            results["task_step"] = {"steps_per_task": steps / len(done),
                                    "cpu_ms": {k: v * len(done) / steps for k, v in task["cpu_ms"].items()},
                                    "io": {k: v * len(done) / steps for k, v in task["io"].items()}}
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def report(r: dict[str, Any]) -> None:
    say("")
    say(f"mnemo capacity: CPU ms and PostgreSQL I/O per operation, one at a time, net of the idle rate; "
        f"{r['cores']} cores, load average {os.getloadavg()[0]:.1f} at the end")
    say("  idle (baseline, CPU ms/s)  " + "  ".join(f"{k} {v:.1f}" for k, v in r["idle"]["cpu_ms_per_s"].items()))
    say(f"  {'operation':<16}{'n':>5}{'api':>8}{'pg':>8}{'worker':>8}{'temporal':>9}{'total':>8}"
        f"{'blk hit':>9}{'blk read':>9}{'WAL KiB':>9}{'disk KiB':>9}")
    for label in ("memory_write", "recall", "session_commit", "deletion", "report_task", "task_step"):
        row = r[label]
        cpu, io = row["cpu_ms"], row["io"]
        n = row.get("operations", f"/{row.get('steps_per_task', 0):.0f}")
        say(f"  {label:<16}{n!s:>5}{cpu['api']:8.1f}{cpu['postgres']:8.1f}{cpu['worker']:8.1f}{cpu['temporal']:9.1f}"
            f"{sum(cpu.values()):8.1f}{io['blks_hit']:9.0f}{io['blks_read']:9.1f}{io['wal_bytes'] / 1024:9.1f}"
            f"{io['disk_write_bytes'] / 1024:9.1f}")
    say("  bytes per memory: " + ", ".join(f"{k} {v:.0f}" for k, v in r["storage_bytes_per_memory"].items()))


if __name__ == "__main__":
    main()
