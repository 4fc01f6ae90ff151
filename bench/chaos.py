"""Chaos: random SIGKILLs of the worker, the API, Temporal and PostgreSQL under a mixed load.

Starts ``mnemo dev --no-demo`` as a child process in a temp dir (removed after) and relies on its
supervision to restart whatever is killed; the pids come from the stack's own ``stack.json``,
which the supervisor rewrites after every restart. Meanwhile a mixed load runs over HTTP in one
tenant: writes (``POST /memory-candidates``), recalls, report tasks (``POST /tasks``; an
approver approves each draft as soon as it waits), and deletions of memories written earlier
(``DELETE /memories/{id}``). Every request that fails (refused connection, 5xx, 429) is retried
after a short pause, as a client would; a write counts as *acknowledged* only once it got its 201,
a deletion once it got its 202 (the job id), a task once it got its 201.

``--kills`` (default 50) kills, one at a time: a random target, SIGKILL, then the clock runs
until ``/readyz`` is 200 again (every dependency back, workers polling) — the recovery time —
then a random pause of ``--pause`` seconds (default 1-4) before the next. When the kills are
over the load stops, every task and deletion is given ``--settle`` seconds (default 300) to
finish, and the verdict is printed:

- acknowledged writes lost: acknowledged, not deleted, and ``GET /memories/{id}`` is not 200
  with the content written (must be 0);
- duplicate side effects: publications on disk (``publications/reports/published/*``) beyond
  one per task, and succeeded publish operations beyond one per task (both must be 0);
- tasks finished: SUCCEEDED of accepted (100 %);
- deletions completed: ``completed`` of accepted (100 %);
- deleted content recalled: deleted memories that a recall of their unique marker still
  returns, or that ``GET`` still returns (0);
- recovery time p50 / p95, per target: from the SIGKILL until the supervisor has a new pid for
  the target in ``stack.json`` and ``/readyz`` is 200.

``mnemo dev`` stops the stack when one child crashes ``MNEMO_DEV_RESTART_LIMIT`` times in
``MNEMO_DEV_RESTART_WINDOW_SECONDS``; kills here are deliberate and spaced by recovery, and the
limit is raised to 1,000 for the run so that a run of unlucky draws on one target does not end it
(the crash-loop stop itself is tested in tests/test_supervisor.py).

Run: ``.venv/bin/python -m bench.chaos [--kills 50] [--seed 7]``; a quick run: ``--kills 8``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from api.devstack.processes import free_port
from bench.corpus import candidate
from bench.harness import free_temporal_port, make_key, percentile, say, seed_sales_data
from memory.db import make_engine, tenant_session

TARGETS = ["worker", "api", "temporal", "postgres"]
TENANT = "chaos"
RETRY = (429, 500, 502, 503, 504)


@dataclass
class Ledger:
    written: dict[str, str] = field(default_factory=dict)  # memory id → its content (acknowledged)
    deleted: dict[str, str] = field(default_factory=dict)  # memory id → deletion job id (acknowledged)
    tasks: set[str] = field(default_factory=set)
    retries: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)


async def _send(client: httpx.AsyncClient, ledger: Ledger, op: str, method: str, url: str, ok: tuple[int, ...],
                stop: asyncio.Event | None = None, **kwargs: Any) -> httpx.Response | None:
    """Retry through the faults (refused, timed out, 5xx, 429) until an answer in ``ok``; None if stopped first."""
    while True:
        ledger.requests[op] += 1
        try:
            response = await client.request(method, url, **kwargs)
            if response.status_code in ok:
                return response
            if response.status_code not in RETRY:
                ledger.unexpected.append(f"{op} {response.status_code} {response.text[:160]}")
                return None
        except httpx.HTTPError:
            pass
        ledger.retries[op] += 1
        if stop is not None and stop.is_set():
            return None
        await asyncio.sleep(0.3)


async def writer(api: str, key: str, ledger: Ledger, stop: asyncio.Event, seed: int) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=api, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        while not stop.is_set():
            marker = f"chaosmark{uuid.uuid4().hex[:12]}"
            body = candidate(f"{marker} 住在上海 note {rng.randrange(1000)}", marker, idempotency_key=marker)
            response = await _send(client, ledger, "write", "POST", "/memory-candidates", (200, 201), stop, json=body)
            if response is not None:
                ledger.written[response.json()["memory_id"]] = body["content"]
            op = rng.random()
            if op < 0.4:
                await _send(client, ledger, "recall", "POST", "/memory-query", (200,), stop, json={"query": "住在上海"})
            elif op < 0.6 and len(ledger.written) > len(ledger.deleted) + 5:
                victim = rng.choice([m for m in ledger.written if m not in ledger.deleted])
                deleted = await _send(client, ledger, "delete", "DELETE", f"/memories/{victim}", (202,), stop)
                if deleted is not None:
                    ledger.deleted[victim] = deleted.json()["job_id"]
            await asyncio.sleep(0.1)


async def tasker(api: str, key: str, ledger: Ledger, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(base_url=api, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        while not stop.is_set():
            body = {"task_type": "monthly-report", "request_intent_id": f"chaos-{uuid.uuid4().hex}",
                    "goal": {"month": "2026-06", "currency": "CNY"}}
            response = await _send(client, ledger, "task_start", "POST", "/tasks", (200, 201), stop, json=body)
            if response is not None:
                ledger.tasks.add(response.json()["task_id"])
            await asyncio.sleep(2.0)


async def approver(api: str, key: str, ledger: Ledger, done: asyncio.Event, finished: dict[str, str]) -> None:
    """Approve every waiting draft; record each task's final status."""
    async with httpx.AsyncClient(base_url=api, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        while not done.is_set():
            for task_id in sorted(ledger.tasks - set(finished)):
                try:
                    view = (await client.get(f"/tasks/{task_id}")).json()
                    if view.get("status") == "WAITING_FOR_APPROVAL" and view.get("pending_approval"):
                        await client.post(f"/tasks/{task_id}/approvals", json={
                            "decision": "approve", "artifact_sha256": view["pending_approval"]["artifact_sha256"],
                            "state_version": view["state_version"]})
                    elif view.get("status") in ("SUCCEEDED", "FAILED", "CANCELLED"):
                        finished[task_id] = view["status"]
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
            await asyncio.sleep(0.5)


def _state(data_dir: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((data_dir / "stack.json").read_text())
    return state


async def _ready(api: str, timeout: float, restarted: Any = None) -> float | None:
    """Seconds until ``/readyz`` is 200 (and ``restarted()`` holds, if given); None on timeout."""
    began = time.monotonic()
    async with httpx.AsyncClient(timeout=3) as client:
        while time.monotonic() - began < timeout:
            if restarted is not None and not restarted():
                await asyncio.sleep(0.1)
                continue
            try:
                if (await client.get(f"{api}/readyz")).status_code == 200:
                    return time.monotonic() - began
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    return None


def _has_new_pid(data_dir: Path, target: str, pid: int) -> bool:
    """Whether the supervisor has restarted ``target`` (its pid in stack.json is no longer ``pid``)."""
    try:
        return bool(_state(data_dir)["child_pids"][target] != pid)
    except (OSError, ValueError, KeyError):
        return False


async def killer(api: str, data_dir: Path, kills: int, pause: tuple[float, float], rng: random.Random,
                 recoveries: dict[str, list[float]], dev: subprocess.Popen[bytes]) -> None:
    for n in range(kills):
        target = rng.choice(TARGETS)
        pid = _state(data_dir)["child_pids"][target]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        # /readyz alone would miss a dead worker (its check looks 90 s back): a new pid is required too.
        ok = await _ready(api, 180, functools.partial(_has_new_pid, data_dir, target, pid))
        recovered = time.monotonic() - killed if ok is not None and dev.poll() is None else None
        if dev.poll() is not None or recovered is None:
            raise SystemExit(f"kill {n + 1} ({target}, pid {pid}): the stack did not recover "
                             f"(mnemo dev exit {dev.poll()})")
        recoveries[target].append(recovered)
        say(f"  kill {n + 1}/{kills}: {target} (pid {pid}) → restarted and ready again after {recovered:.1f} s")
        await asyncio.sleep(rng.uniform(*pause))


async def verify(api: str, key: str, ledger: Ledger) -> dict[str, Any]:
    lost: list[str] = []
    recalled: list[str] = []
    async with httpx.AsyncClient(base_url=api, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        for memory_id, content in ledger.written.items():
            if memory_id in ledger.deleted:
                continue
            response = await _send(client, ledger, "verify", "GET", f"/memories/{memory_id}", (200, 404))
            if response is None or response.status_code != 200 or response.json().get("content") != content:
                lost.append(memory_id)
        statuses: Counter[str] = Counter()
        for memory_id, job_id in ledger.deleted.items():
            job = await _send(client, ledger, "verify", "GET", f"/memory-deletions/{job_id}", (200,))
            statuses[job.json()["status"] if job is not None else "unreadable"] += 1
            got = await _send(client, ledger, "verify", "GET", f"/memories/{memory_id}", (200, 404))
            marker = ledger.written[memory_id].split()[0]
            found = await _send(client, ledger, "verify", "POST", "/memory-query", (200,),
                                json={"query": marker, "limit": 50, "min_relevance": 0})
            answer = found.text if found is not None else ""
            if (got is not None and got.status_code == 200) or memory_id in answer or marker in answer:
                recalled.append(memory_id)
    return {"lost": lost, "recalled": recalled, "deletions": statuses}


async def settle(api: str, key: str, ledger: Ledger, finished: dict[str, str], seconds: float) -> None:
    """Wait until every task has finished and every deletion completed (or the time is up)."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=api, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        while time.monotonic() < deadline:
            pending = 0
            for job_id in ledger.deleted.values():
                try:
                    if (await client.get(f"/memory-deletions/{job_id}")).json().get("status") != "completed":
                        pending += 1
                except (httpx.HTTPError, ValueError):
                    pending += 1
            if not pending and set(finished) >= ledger.tasks:
                return
            await asyncio.sleep(2)


def _publications(data_dir: Path) -> Counter[str]:
    per_task: Counter[str] = Counter()
    root = data_dir / "publications" / "reports" / "published"
    for meta in root.glob("*/publication.json") if root.exists() else []:
        per_task[json.loads(meta.read_text()).get("task_id", meta.parent.name)] += 1
    return per_task


async def run(args: argparse.Namespace, data_dir: Path, api: str, dev: subprocess.Popen[bytes]) -> None:
    state = _state(data_dir)
    url = state["database_url"]
    owner = make_key(url, TENANT, "owner", ["memory_writer", "operator"])
    approver_key = make_key(url, TENANT, "approver", ["approver"])
    seed_sales_data(url, TENANT, lines=600)
    ledger = Ledger()
    finished: dict[str, str] = {}
    stop, done = asyncio.Event(), asyncio.Event()
    recoveries: dict[str, list[float]] = defaultdict(list)
    rng = random.Random(args.seed)
    load = [asyncio.create_task(writer(api, owner, ledger, stop, n)) for n in range(args.writers)]
    load.append(asyncio.create_task(tasker(api, owner, ledger, stop)))
    approving = asyncio.create_task(approver(api, approver_key, ledger, done, finished))
    began = time.monotonic()
    say(f"load running; {args.kills} kills; load average {os.getloadavg()[0]:.2f}")
    await asyncio.sleep(3)
    try:
        await killer(api, data_dir, args.kills, (args.pause_min, args.pause_max), rng, recoveries, dev)
    finally:
        stop.set()
        await asyncio.gather(*load, return_exceptions=True)
    chaos_seconds = time.monotonic() - began
    load_at_end = os.getloadavg()[0]
    say(f"kills over after {chaos_seconds:.0f} s; settling (up to {args.settle:.0f} s)")
    await settle(api, owner, ledger, finished, args.settle)
    done.set()
    await approving
    verdict = await verify(api, owner, ledger)
    engine = make_engine(url, pool_size=1)
    try:
        with tenant_session(engine, TENANT) as session:
            operations = session.execute(text(
                "SELECT count(*) - count(DISTINCT task_id) FROM task_operations WHERE status = 'SUCCEEDED'"
            )).scalar_one()
    finally:
        engine.dispose()
    publications = _publications(data_dir)
    all_recoveries = [v for values in recoveries.values() for v in values]
    succeeded = sum(1 for t in ledger.tasks if finished.get(t) == "SUCCEEDED")
    completed = verdict["deletions"].get("completed", 0)
    say(f"\n== chaos: {args.kills} SIGKILLs over {chaos_seconds:.0f} s "
        f"({', '.join(f'{t} {len(recoveries[t])}' for t in TARGETS)}); load average {load_at_end:.2f} at the end ==")
    say(f"requests {sum(ledger.requests.values())} ({dict(ledger.requests)}), retried through faults "
        f"{sum(ledger.retries.values())}; unexpected answers {len(ledger.unexpected)}"
        + (f" (first: {ledger.unexpected[0]})" if ledger.unexpected else ""))
    say(f"acknowledged writes {len(ledger.written)}; lost: {len(verdict['lost'])}")
    extra_publications = sum(c - 1 for c in publications.values() if c > 1)
    say(f"duplicate side effects: publications beyond one per task {extra_publications}, "
        f"succeeded publish operations beyond one per task {operations}")
    say(f"tasks finished: {succeeded}/{len(ledger.tasks)} SUCCEEDED "
        f"({100 * succeeded / max(1, len(ledger.tasks)):.0f} %; statuses {dict(Counter(finished.values()))}); "
        f"publications {sum(publications.values())}")
    say(f"deletions completed: {completed}/{len(ledger.deleted)} "
        f"({100 * completed / max(1, len(ledger.deleted)):.0f} %; {dict(verdict['deletions'])})")
    say(f"deleted content recalled or read: {len(verdict['recalled'])}")
    say(f"recovery time (kill → /readyz 200): p50 {percentile(all_recoveries, 0.5):.1f} s, "
        f"p95 {percentile(all_recoveries, 0.95):.1f} s, max {max(all_recoveries):.1f} s")
    for target in TARGETS:
        if recoveries[target]:
            values = recoveries[target]
            say(f"  {target:<9} n={len(values):<3} p50 {percentile(values, 0.5):.1f} s  "
                f"p95 {percentile(values, 0.95):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--pause-min", type=float, default=1.0)
    parser.add_argument("--pause-max", type=float, default=4.0)
    parser.add_argument("--settle", type=float, default=300.0)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="mnemo-chaos-"))
    port = free_port()
    temporal_port = free_temporal_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")},
           "MNEMO_DEV_RESTART_LIMIT": "1000"}
    log = (data_dir / "dev.log").open("wb")
    dev = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "dev", "--no-demo", "--data-dir", str(data_dir), "--port", str(port),
         "--temporal-port", str(temporal_port)],
        cwd=Path(__file__).resolve().parents[1], env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    api = f"http://127.0.0.1:{port}"
    try:
        # stack.json is written just after the first /readyz 200: it is the supervisor's, and holds the pids.
        ready = asyncio.run(_ready(api, 180, lambda: (data_dir / "stack.json").exists()))
        if ready is None:
            raise SystemExit(f"mnemo dev did not get ready; see {data_dir / 'dev.log'}")
        say(f"mnemo dev ready ({api}, data in {data_dir})")
        asyncio.run(run(args, data_dir, api, dev))
        restarts = sum(1 for line in (data_dir / "dev.log").read_text().splitlines() if "restarting it" in line)
        say(f"mnemo dev restart lines: {restarts}")
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(60)
        except subprocess.TimeoutExpired:
            dev.kill()
        log.close()
        if os.environ.get("CHAOS_KEEP"):
            say(f"kept {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
