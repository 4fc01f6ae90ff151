"""Mixed load on the real API over the loopback, and one abusive tenant beside a normal one.

Starts the embedded stack by itself (PostgreSQL 18 + pgvector, the Temporal dev server, and
``mnemo worker`` + ``mnemo api`` — uvicorn — as child processes, as ``mnemo dev`` does; temp dir,
removed after), or uses the MNEMO_* services when ``MNEMO_DATABASE_URL`` is set (see
bench/harness.py ``services``). Two phases in the same run:

1. **Mixed load**: ``--clients`` (50) concurrent HTTP clients for ``--seconds`` (60). Client *i* is
   user ``u{i}`` of tenant ``t{i // 4}``: four clients per tenant, so a tenant never has more
   recalls in flight than ``MNEMO_TENANT_RECALL_CONCURRENCY`` (4) and a 429 is a real error here.
   Each client draws its next operation at random (fixed seed) from: write (``POST
   /memory-candidates``, ACTIVE), recall (``POST /memory-query``), read (``GET /memories/{id}`` of
   one of its own), correction (``PATCH`` with the version it holds), deletion (``DELETE
   /memories/{id}``, 202), task start (``POST /tasks``, a monthly report on the tenant's sample
   data) and task read (``GET /tasks/{id}``). Every answer whose status is not the one that
   operation must give counts as an error, as does every transport error; latency is client-side.
2. **Abuse**: tenant ``normal``, one client, plain short recalls one after another: first alone
   (idle), then while tenant ``abuser`` runs ``--abusers`` (16) clients sending 2,000-character CJK
   recalls back to back. Printed: the normal tenant's recall p50/p95 idle and under abuse and the
   ratio of the p95s (target ≤ 2×); the abusive tenant's answers by status (beyond its limit it must
   get 429 ``tenant_busy``).

Run: ``.venv/bin/python -m bench.load [--clients 50] [--seconds 60] [--abusers 16] [--normal 150]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.corpus import long_cjk_query, random_candidate, short_note
from bench.harness import make_key, percentile, say, seed_sales_data, services

PER_TENANT = 4
# Operation → (weight, the status it must answer).
MIX: dict[str, tuple[int, int]] = {
    "write": (30, 201),
    "recall": (25, 200),
    "read": (18, 200),
    "correct": (10, 200),
    "delete": (6, 202),
    "task_start": (3, 201),
    "task_read": (8, 200),
}


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    errors: list[str] = field(default_factory=list)

    def record(self, op: str, began: float, response: httpx.Response | None, expected: int, error: str = "") -> bool:
        self.latencies[op].append((time.perf_counter() - began) * 1000)
        status = response.status_code if response is not None else -1
        self.statuses[op][status] += 1
        if status != expected:
            detail = error or (response.text[:200] if response is not None else "")
            self.errors.append(f"{op}: {status} {detail}")
            return False
        return True


async def _call(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> tuple[httpx.Response | None, str]:
    try:
        return await client.request(method, url, **kwargs), ""
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"


async def mixed_client(api_url: str, key: str, seed: int, until: float, tally: Tally) -> None:
    rng = random.Random(seed)
    mine: dict[str, int] = {}  # memory id → the version this client last wrote
    tasks: list[str] = []
    ops, weights = list(MIX), [w for w, _ in MIX.values()]
    async with httpx.AsyncClient(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        while time.monotonic() < until:
            op = rng.choices(ops, weights)[0]
            if op in ("read", "correct", "delete") and not mine:
                op = "write"
            if op == "task_read" and not tasks:
                op = "task_start"
            expected = MIX[op][1]
            began = time.perf_counter()
            if op == "write":
                response, error = await _call(client, "POST", "/memory-candidates", json=random_candidate(rng))
                if tally.record(op, began, response, expected, error):
                    assert response is not None
                    mine[response.json()["memory_id"]] = response.json()["version"]
            elif op == "recall":
                response, error = await _call(client, "POST", "/memory-query", json={"query": short_note(rng)})
                tally.record(op, began, response, expected, error)
            elif op == "read":
                memory_id = rng.choice(list(mine))
                response, error = await _call(client, "GET", f"/memories/{memory_id}")
                tally.record(op, began, response, expected, error)
            elif op == "correct":
                memory_id = rng.choice(list(mine))
                body = {"expected_version": mine[memory_id], "content": short_note(rng)}
                response, error = await _call(client, "PATCH", f"/memories/{memory_id}", json=body)
                if tally.record(op, began, response, expected, error):
                    assert response is not None
                    mine.pop(memory_id)
                    mine[response.json()["memory_id"]] = response.json()["version"]
            elif op == "delete":
                memory_id = rng.choice(list(mine))
                response, error = await _call(client, "DELETE", f"/memories/{memory_id}")
                if tally.record(op, began, response, expected, error):
                    mine.pop(memory_id)
            elif op == "task_start":
                body = {"task_type": "monthly-report", "request_intent_id": f"load-{uuid.uuid4().hex}",
                        "goal": {"month": "2026-06", "currency": "CNY"}}
                response, error = await _call(client, "POST", "/tasks", json=body)
                if tally.record(op, began, response, expected, error):
                    assert response is not None
                    tasks.append(response.json()["task_id"])
            else:
                response, error = await _call(client, "GET", f"/tasks/{rng.choice(tasks)}")
                tally.record(op, began, response, expected, error)


async def phase_mixed(api_url: str, keys: list[str], seconds: float) -> Tally:
    tally = Tally()
    until = time.monotonic() + seconds
    await asyncio.gather(*[mixed_client(api_url, key, n, until, tally) for n, key in enumerate(keys)])
    return tally


async def normal_recalls(api_url: str, key: str, count: int, seed: int) -> tuple[list[float], Counter[int]]:
    rng = random.Random(seed)
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    async with httpx.AsyncClient(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        for _ in range(count):
            began = time.perf_counter()
            response, _error = await _call(client, "POST", "/memory-query", json={"query": short_note(rng)})
            latencies.append((time.perf_counter() - began) * 1000)
            statuses[response.status_code if response is not None else -1] += 1
    return latencies, statuses


async def abuser(api_url: str, key: str, stop: asyncio.Event, statuses: Counter[str], seed: int) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        while not stop.is_set():
            query = long_cjk_query(rng)
            response, _error = await _call(client, "POST", "/memory-query", json={"query": query})
            if response is None:
                statuses["transport error"] += 1
            elif response.status_code == 429:
                statuses[f"429 {response.json()['error']['code']}"] += 1
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")) * rng.uniform(0.0, 0.2))
            else:
                statuses[str(response.status_code)] += 1


async def phase_abuse(api_url: str, normal_key: str, abuser_key: str, abusers: int, count: int) -> dict[str, Any]:
    idle, idle_statuses = await normal_recalls(api_url, normal_key, count, seed=1)
    stop = asyncio.Event()
    statuses: Counter[str] = Counter()
    running = [asyncio.create_task(abuser(api_url, abuser_key, stop, statuses, seed=n)) for n in range(abusers)]
    await asyncio.sleep(3)  # the abuse is in full swing before the normal tenant is measured
    loaded, loaded_statuses = await normal_recalls(api_url, normal_key, count, seed=1)
    stop.set()
    await asyncio.gather(*running)
    return {"idle": idle, "loaded": loaded, "idle_statuses": idle_statuses, "loaded_statuses": loaded_statuses,
            "abuser": statuses}


async def _prime(api_url: str, key: str, n: int) -> None:
    """A few memories per recall tenant, so recalls have something to find."""
    rng = random.Random(99)
    async with httpx.AsyncClient(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        for _ in range(n):
            (await client.post("/memory-candidates", json=random_candidate(rng))).raise_for_status()


def _ms(values: list[float]) -> str:
    return f"p50 {percentile(values, 0.5):7.1f} ms  p95 {percentile(values, 0.95):7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--abusers", type=int, default=16, help="concurrent clients of the abusive tenant")
    parser.add_argument("--normal", type=int, default=150, help="normal-tenant recalls per abuse sub-phase")
    parser.add_argument("--skip-mixed", action="store_true")
    args = parser.parse_args()
    with services("mnemo-load-") as s:
        roles = ["memory_writer", "operator"]
        tenants = sorted({f"t{n // PER_TENANT}" for n in range(args.clients)})
        keys = [make_key(s.sqlalchemy_url, f"t{n // PER_TENANT}", f"u{n}", roles) for n in range(args.clients)]
        for tenant in tenants:  # after the keys, which create the tenants
            seed_sales_data(s.sqlalchemy_url, tenant, lines=600)
        normal_key = make_key(s.sqlalchemy_url, "normal", "n0", roles)
        abuser_key = make_key(s.sqlalchemy_url, "abuser", "a0", roles)
        asyncio.run(_prime(s.api_url, normal_key, 30))
        asyncio.run(_prime(s.api_url, abuser_key, 30))
        say(f"stack ready ({s.api_url}); {len(tenants)} tenants; load average {os.getloadavg()[0]:.2f}")
        if not args.skip_mixed:
            load_before = os.getloadavg()[0]
            began = time.monotonic()
            tally = asyncio.run(phase_mixed(s.api_url, keys, args.seconds))
            elapsed = time.monotonic() - began
            load_after = os.getloadavg()[0]
            total = sum(len(v) for v in tally.latencies.values())
            say(f"\n== mixed load: {args.clients} clients, {elapsed:.0f} s, "
                f"{total} requests ({total / elapsed:.0f}/s); "
                f"load average {load_before:.2f} before, {load_after:.2f} at the end ==")
            say(f"errors (any status but the expected one, or no answer): {len(tally.errors)}")
            for line in Counter(e[:120] for e in tally.errors).most_common(5):
                say(f"  {line[1]} × {line[0]}")
            say(f"{'operation':<11} {'n':>6}  latency")
            for op in MIX:
                values = tally.latencies.get(op, [])
                if values:
                    say(f"{op:<11} {len(values):>6}  {_ms(values)}  statuses {dict(tally.statuses[op])}")
        load_before = os.getloadavg()[0]
        abuse = asyncio.run(phase_abuse(s.api_url, normal_key, abuser_key, args.abusers, args.normal))
        idle95, loaded95 = percentile(abuse["idle"], 0.95), percentile(abuse["loaded"], 0.95)
        say(f"\n== abuse: tenant 'abuser' with {args.abusers} clients of 2,000-character CJK recalls beside tenant "
            f"'normal' (one client, {args.normal} plain recalls per sub-phase); load average {load_before:.2f} before, "
            f"{os.getloadavg()[0]:.2f} at the end ==")
        say(f"normal, idle        {_ms(abuse['idle'])}  statuses {dict(abuse['idle_statuses'])}")
        say(f"normal, under abuse {_ms(abuse['loaded'])}  statuses {dict(abuse['loaded_statuses'])}")
        say(f"under abuse / idle, p95: {loaded95 / idle95:.2f}× (target ≤ 2×)")
        say(f"abuser's answers: {dict(abuse['abuser'])}")


if __name__ == "__main__":
    main()
