"""The agent protocol's overhead per step against a bare activity round trip, and data-only tasks published once.

On the stack ``mnemo dev`` runs (:func:`bench.harness.services`; its worker loads :mod:`bench.task_steps`), in one
run:

1. the baseline: a bare activity round trip (:func:`bench.tasks_throughput.bare_round_trip`, checked to run its
   no-op activities one after another), measured before and after the protocol phase;
2. the protocol: a definition registered over REST (``a1..aK`` agent steps, a no-op compute step, an approval of
   ``aK``'s artifact, a publish to ``archive``); ``--tasks`` tasks, ``--concurrency`` at a time, each performed by a
   bench agent over plain HTTP with the owner's ``agent_runtime`` key: claim → complete, step after step, the
   approval given through the API. Per agent step: (a) the claim's latency, (b) the complete's, (c) the engine's
   overhead — from the complete's answer to the next step claimable (signal → collect → open next; the agent
   polls its claim every ``--poll-ms``, which bounds the resolution), (d) the whole cycle, claim to next claim.
   From the read model (the database's clock): each step's cycle from the previous step's success checkpoint to
   its own, for agent steps and for the compute step, and the engine's part alone (a step's success checkpoint
   to the next one's ``waiting_for_agent``);
3. ``--data-tasks`` tasks (default 200) of a data-only definition (two compute steps of :mod:`bench.task_steps`,
   an approval, a publish to ``archive``) started over REST at once, every approval through the API; the
   publications counted per task in the archive destination itself and through ``GET /tasks/{id}/publications``.

Run: ``.venv/bin/python -m bench.agent_protocol [--tasks 30] [--steps 5] [--concurrency 1] [--data-tasks 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
from sqlalchemy import Engine
from temporalio.client import Client

from activities.stores import StoredDestination
from bench.harness import Services, make_key, percentile, say, services
from bench.tasks_throughput import bare_round_trip, checkpoint_times, round_trip_worker
from memory.artifact_store.postgres import PostgresArtifactStore
from memory.db import make_engine

TENANT = "bench"
AGENT_TYPE = "bench-agent"
DATA_TYPE = "bench-data"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def agent_definition(steps: int) -> dict[str, Any]:
    """``a1..aK`` agent steps, a no-op compute step (the comparison), the approval of ``aK/out.md``, the archive."""
    agents = [{"step_id": f"a{n}", "kind": "agent", "description": "bench agent step"} for n in range(1, steps + 1)]
    return {
        "version": f"{steps}-steps",
        "goal_schema": {"type": "object", "required": ["n"], "additionalProperties": False,
                        "properties": {"n": {"type": "integer"}}},
        "steps": [*agents, {"step_id": "tally", "kind": "compute", "function": "bench-steps.noop"},
                  {"step_id": "review", "kind": "approval", "artifact_from": f"a{steps}/out.md"},
                  {"step_id": "archive", "kind": "publish", "destination": "archive"}],
        "redraft_step": f"a{steps}",
    }


DATA_DEFINITION: dict[str, Any] = {
    "version": "1",
    "goal_schema": {"type": "object", "required": ["n"], "additionalProperties": False,
                    "properties": {"n": {"type": "integer"}}},
    "steps": [{"step_id": "prepare", "kind": "compute", "function": "bench-steps.noop"},
              {"step_id": "report", "kind": "compute", "function": "bench-steps.report"},
              {"step_id": "review", "kind": "approval", "artifact_from": "report/report.md"},
              {"step_id": "archive", "kind": "publish", "destination": "archive"}],
    "redraft_step": "report",
}


@dataclass(frozen=True)
class Keys:
    admin: str
    owner: str
    agent: str
    approver: str


class Api:
    """Plain HTTP to mnemo, as an agent in any language calls it; a 429 or 503 is waited out (``Retry-After``)."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.waits = 0
        """Answers waited out (429/503): the admission layer's share of the figures."""

    async def call(self, method: str, path: str, key: str, body: Any = None,
                   params: dict[str, str] | None = None) -> httpx.Response:
        while True:
            response = await self.http.request(method, path, json=body, params=params,
                                               headers={"Authorization": f"Bearer {key}"})
            if response.status_code not in (429, 503):
                return response
            self.waits += 1
            await asyncio.sleep(float(response.headers.get("Retry-After", "1")))

    async def ok(self, method: str, path: str, key: str, body: Any = None, params: dict[str, str] | None = None
                 ) -> Any:
        response = await self.call(method, path, key, body, params)
        if response.status_code not in (200, 201):
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")
        return response.json()

    async def start(self, key: str, task_type: str, intent: str, goal: dict[str, Any]) -> str:
        body = {"task_type": task_type, "request_intent_id": intent, "goal": goal}
        return str((await self.ok("POST", "/tasks", key, body))["task_id"])

    async def wait_for(self, key: str, task_id: str, done: Callable[[dict[str, Any]], bool],
                       poll: float = 0.02, timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            view: dict[str, Any] = await self.ok("GET", f"/tasks/{task_id}", key)
            if done(view) or view["status"] in TERMINAL:
                return view
            if time.monotonic() > deadline:
                raise RuntimeError(f"task {task_id} still {view['status']} at {view.get('current_step_id')}")
            await asyncio.sleep(poll)

    async def approve(self, key: str, task_id: str, sha256: str, state_version: int) -> bool:
        """True once approved; False when the task moved on meanwhile (ask again with its new state)."""
        body = {"decision": "approve", "artifact_sha256": sha256, "state_version": state_version}
        response = await self.call("POST", f"/tasks/{task_id}/approvals", key, body)
        return response.status_code == 200


@dataclass
class AgentFigures:
    claim: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    engine: list[float] = field(default_factory=list)
    cycle: list[float] = field(default_factory=list)
    polls: int = 0


async def _claim_when_open(api: Api, key: str, task_id: str, poll: float, figures: AgentFigures
                           ) -> tuple[dict[str, Any], float, float]:
    """Claim the task's open step, asking again every ``poll`` while it is not open; the claim, when the
    successful request was sent and how long it took."""
    while True:
        sent = time.perf_counter()
        response = await api.call("POST", f"/tasks/{task_id}/attempts", key, {"lease_seconds": 60})
        answered = time.perf_counter()
        if response.status_code == 201:
            return response.json(), sent, answered - sent
        if response.json().get("error", {}).get("code") != "no_step_ready":
            raise RuntimeError(f"claim on {task_id}: {response.status_code} {response.text}")
        figures.polls += 1
        await asyncio.sleep(poll)


async def _perform(api: Api, keys: Keys, n: int, steps: int, poll: float, figures: AgentFigures | None) -> str:
    """One task of the agent definition, from start to SUCCEEDED: every step claimed and completed by this agent,
    the approval given through the API. Figures are kept when ``figures`` is given (not for warm-ups)."""
    scratch = figures or AgentFigures()
    task_id = await api.start(keys.owner, AGENT_TYPE, f"agent-{n}-{uuid.uuid4().hex[:6]}", {"n": n})
    await api.wait_for(keys.owner, task_id, lambda v: v.get("waiting_reason") == "AGENT")  # its row exists then
    claimed, sent, took = await _claim_when_open(api, keys.agent, task_id, poll, scratch)
    for index in range(1, steps + 1):
        assert claimed["step_id"] == f"a{index}", claimed
        content = base64.b64encode(f"step a{index} of task {n}\n".encode()).decode()
        body = {"artifacts": [{"name": "out.md", "media_type": "text/markdown", "content_base64": content}]}
        began = time.perf_counter()
        await api.ok("POST", f"/tasks/{task_id}/attempts/{claimed['attempt_id']}/complete", keys.agent, body)
        answered = time.perf_counter()
        scratch.claim.append(took)
        scratch.complete.append(answered - began)
        if index < steps:
            next_claim, next_sent, took = await _claim_when_open(api, keys.agent, task_id, poll, scratch)
            scratch.engine.append(next_sent - answered)
            scratch.cycle.append(next_sent - sent)
            claimed, sent = next_claim, next_sent
    view = await api.wait_for(keys.owner, task_id, lambda v: v["status"] == "WAITING_FOR_APPROVAL")
    while view["status"] == "WAITING_FOR_APPROVAL" and not await api.approve(
            keys.approver, task_id, view["pending_approval"]["artifact_sha256"], view["state_version"]):
        view = await api.ok("GET", f"/tasks/{task_id}", keys.owner)
    final = await api.wait_for(keys.owner, task_id, lambda v: False)
    if final["status"] != "SUCCEEDED":
        raise RuntimeError(f"agent task {task_id} ended {final['status']}: {final.get('error')}")
    return task_id


async def _in_parallel(jobs: Iterable[Callable[[], Awaitable[str]]], at_once: int) -> list[str]:
    """Run the jobs, ``at_once`` at a time; their results in order."""
    gate = asyncio.Semaphore(at_once)

    async def gated(job: Callable[[], Awaitable[str]]) -> str:
        async with gate:
            return await job()

    return list(await asyncio.gather(*[gated(job) for job in jobs]))


def _read_model_cycles(engine: Engine, task_ids: list[str], steps: int) -> dict[str, list[float]]:
    """From each task's checkpoints (the database's clock): agent and compute step cycles (previous step's success
    to this one's) and the engine's part of an agent step (a success to the next step's ``waiting_for_agent``)."""
    out: dict[str, list[float]] = {"agent_cycle": [], "compute_cycle": [], "engine": []}
    for task_id in task_ids:
        at = dict(checkpoint_times(engine, TENANT, task_id))
        done = [at[f"step_succeeded:a{n}"] for n in range(1, steps + 1)]
        out["agent_cycle"] += [(b - a).total_seconds() for a, b in itertools.pairwise(done)]
        out["engine"] += [(at[f"waiting_for_agent:a{n + 1}"] - at[f"step_succeeded:a{n}"]).total_seconds()
                          for n in range(1, steps)]
        out["compute_cycle"].append((at["step_succeeded:tally"] - done[-1]).total_seconds())
    return out


def _row(label: str, values: list[float], round_trip: float) -> str:
    p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
    return (f"{label:<48} {p50 * 1000:>8.1f} {p95 * 1000:>8.1f} {p50 / round_trip:>8.1f}× {p95 / round_trip:>8.1f}×"
            f"  (n={len(values)})")


async def _data_only(api: Api, keys: Keys, engine: Engine, count: int) -> None:
    """``count`` data-only tasks started over REST at once (their starts admitted as the API admits them), each
    approved through the API as soon as it waits, then every one waited for; publications counted."""
    began = time.perf_counter()
    started: set[str] = set()

    async def start(n: int) -> str:
        task_id = await api.start(keys.owner, DATA_TYPE, f"data-{n}", {"n": n})
        started.add(task_id)
        return task_id

    starting = asyncio.ensure_future(_in_parallel([partial(start, n) for n in range(count)], 32))
    approved: set[str] = set()
    failed: set[str] = set()  # never to be approved; their status is printed below
    while not starting.done() or not started <= approved | failed:
        waiting = await api.ok("GET", "/tasks", keys.approver,
                               params={"owner": "all", "status": "WAITING_FOR_APPROVAL", "limit": "200"})
        for row in waiting["items"]:
            if row["task_id"] in started - approved and await api.approve(
                    keys.approver, row["task_id"], row["draft_sha256"], row["state_version"]):
                approved.add(row["task_id"])
        ended = await api.ok("GET", "/tasks", keys.owner, params={"status": "FAILED", "limit": "200"})
        failed |= started & {row["task_id"] for row in ended["items"]}
        await asyncio.sleep(0.2)
    ids = starting.result()
    say(f"{count} data-only tasks started and approved in {time.perf_counter() - began:.1f} s")
    finals = [await api.wait_for(keys.owner, task_id, lambda v: False) for task_id in ids]
    elapsed = time.perf_counter() - began
    statuses = Counter(view["status"] for view in finals)
    archive = StoredDestination("archive", engine, PostgresArtifactStore(engine)).all_publications()
    stored = Counter(p.metadata["task_id"] for p in archive if p.metadata.get("tenant_id") == TENANT)
    listed = Counter({t: len((await api.ok("GET", f"/tasks/{t}/publications", keys.owner))["items"]) for t in ids})
    say(f"\n== {count} data-only tasks ({DATA_TYPE}: 2 compute steps of bench.task_steps, approval, archive) ==")
    say(f"statuses: {dict(statuses)}; approvals given through the API: {len(approved)}")
    durations = [(times[-1][1] - times[0][1]).total_seconds()
                 for times in (checkpoint_times(engine, TENANT, t) for t in ids)]
    say(f"task duration (first to last checkpoint): p50 {percentile(durations, 0.5):.2f} s, "
        f"p95 {percentile(durations, 0.95):.2f} s, max {max(durations):.2f} s")
    say(f"wall time {elapsed:.1f} s → {count / elapsed:.2f} tasks/s; load average {os.getloadavg()[0]:.2f}; "
        f"answers waited out (429/503) in the whole run: {api.waits}")
    for label, counts in (("archive destination", stored), ("GET /tasks/{id}/publications", listed)):
        per_task = Counter(counts[t] for t in ids)
        say(f"publications per task ({label}): {dict(sorted(per_task.items()))}; "
            f"duplicates {sum(max(0, counts[t] - 1) for t in ids)}")


async def measure(svc: Services, keys: Keys, args: argparse.Namespace) -> None:
    engine = make_engine(svc.sqlalchemy_url, pool_size=2)
    client = await Client.connect(svc.temporal_address, namespace=svc.temporal_namespace)
    queue = f"bench-rt-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=svc.api_url, timeout=60.0) as http:
        api = Api(http)
        for task_type, body in ((AGENT_TYPE, agent_definition(args.steps)), (DATA_TYPE, DATA_DEFINITION)):
            await api.ok("PUT", f"/task-definitions/{task_type}", keys.admin, body)
        with ThreadPoolExecutor(max_workers=2) as executor:
            async with round_trip_worker(client, queue, executor):
                before = await bare_round_trip(client, queue)
                say(f"baseline before: {before * 1000:.1f} ms; warming up")
                poll = args.poll_ms / 1000
                for n in range(2):
                    await _perform(api, keys, -1 - n, args.steps, poll, None)
                figures = AgentFigures()
                began = time.perf_counter()
                ids = await _in_parallel(
                    [partial(_perform, api, keys, n, args.steps, poll, figures) for n in range(args.tasks)],
                    args.concurrency)
                elapsed = time.perf_counter() - began
                load = os.getloadavg()[0]
                after = await bare_round_trip(client, queue)
        round_trip = statistics.mean([before, after])
        db = _read_model_cycles(engine, ids, args.steps)
        say(f"\n== the agent protocol: {args.tasks} tasks × {args.steps} agent steps, {args.concurrency} at a time ==")
        say(f"bare activity round trip (no-op activity, sequential, same run): before {before * 1000:.1f} ms, "
            f"after {after * 1000:.1f} ms, mean {round_trip * 1000:.1f} ms (the ratios' unit)")
        say(f"{args.tasks} tasks SUCCEEDED in {elapsed:.1f} s; load average {load:.2f}; "
            f"claims refused while the next step was not open yet: {figures.polls}; "
            f"answers waited out (429/503) so far: {api.waits}")
        say(f"{'per agent step, ms':<48} {'p50':>8} {'p95':>8} {'p50/rt':>9} {'p95/rt':>9}")
        say(_row("(a) claim (POST .../attempts)", figures.claim, round_trip))
        say(_row("(b) complete (POST .../complete)", figures.complete, round_trip))
        say(_row("(c) engine: complete answered → next claimable", figures.engine, round_trip))
        say(_row("(d) whole cycle: claim → next claim", figures.cycle, round_trip))
        say("read model (database clock):")
        say(_row("agent step: previous success → its success", db["agent_cycle"], round_trip))
        say(_row("compute step (no-op): previous success → its", db["compute_cycle"], round_trip))
        say(_row("engine: success → next waiting_for_agent", db["engine"], round_trip))
        if args.data_tasks:
            await _data_only(api, keys, engine, args.data_tasks)
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30, help="measured tasks of the agent definition")
    parser.add_argument("--steps", type=int, default=5, help="agent steps per task")
    parser.add_argument("--concurrency", type=int, default=1, help="agent tasks performed at once")
    parser.add_argument("--poll-ms", type=float, default=5.0, help="the agent's pause between claims of a step "
                        "that is not open yet (bounds (c)'s resolution)")
    parser.add_argument("--data-tasks", type=int, default=200, help="data-only tasks (0: skip)")
    parser.add_argument("--starts-per-minute", type=int, help="the stack's MNEMO_TENANT_WORKFLOW_STARTS_PER_MINUTE "
                        "(default: the API's own, 120: then starting 200 tasks takes ~90 s by design)")
    args = parser.parse_args()
    if args.starts_per_minute:
        os.environ["MNEMO_TENANT_WORKFLOW_STARTS_PER_MINUTE"] = str(args.starts_per_minute)
    # The stack's worker (and API) load the compute functions the definitions name; the bench runs from the
    # repository root, which is on their path too.
    os.environ["MNEMO_TASK_MODULES"] = "bench.task_steps"
    with services("mnemo-bench-agents-") as svc:
        if svc.stack is None:
            say("using the running services: their worker must load bench.task_steps (MNEMO_TASK_MODULES)")
        keys = Keys(make_key(svc.sqlalchemy_url, TENANT, "root", ["admin"]),
                    make_key(svc.sqlalchemy_url, TENANT, "alice", ["memory_writer"]),
                    make_key(svc.sqlalchemy_url, TENANT, "alice", ["agent_runtime"]),
                    make_key(svc.sqlalchemy_url, TENANT, "bob", ["approver"]))
        say(f"stack ready: API {svc.api_url}, Temporal {svc.temporal_address}")
        asyncio.run(measure(svc, keys, args))


if __name__ == "__main__":
    main()
