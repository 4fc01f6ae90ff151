"""Fair admission under attack: another tenant's p95 while one tenant replays issue 23's finding 7.

Starts the embedded stack by itself (as ``bench/load.py``: PostgreSQL, the Temporal dev server, ``mnemo worker``
and ``mnemo api`` as child processes, temp dir removed after), or uses the MNEMO_* services when
``MNEMO_DATABASE_URL`` is set. Sessions never commit by themselves here (the attacker's long session stays as
posted). Tenant ``victim`` measures, one request at a time, its recall (``POST /memory-query``), get (``GET
/memories/{id}``), resource search (``POST /resources/search``, a short query) and session commit (post one
message, ``POST /sessions/{id}/commit``, poll until the commit is terminal). It does so idle, then while tenant
``attacker`` runs, each in turn, with ``--clients`` (8) concurrent clients sending back to back:

- **window**: ``GET /sessions/{id}/window?budget_tokens=100000`` on a ``--messages`` (2,000) message CJK session;
- **search**: ``POST /resources/search`` with a 1,000-character CJK query over ``--records`` (300) CJK todos;
- **deletion**: deletion requests of its own memories (each a valid request: a deletion workflow);
- **recall**: 2,000-character CJK recalls.

An attacker's client that gets a 429 waits a random 0-20 % of ``Retry-After`` and goes on. Printed: per
operation the idle p95 and, per attack, the p95 under it as a ratio of the idle one (target ≤ 2×), and the
attacker's answers by status.

Run: ``.venv/bin/python -m bench.fairness [--samples 30] [--commits 4] [--clients 8] [--messages 2000]
[--attacks window search deletion recall]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable

import httpx

from bench.corpus import CJK, long_cjk_query, random_candidate, short_note
from bench.harness import make_key, percentile, say, services

ROLES = ["memory_writer", "admin"]
ATTACKS = ("window", "search", "deletion", "recall")
OPS = ("recall", "get", "search", "commit")
TERMINAL = {"completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion"}
Attack = Callable[[httpx.AsyncClient, random.Random], Awaitable[httpx.Response]]


def _client(api_url: str, key: str, timeout: float = 120) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=api_url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout)


def _cjk(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(CJK[:400]) for _ in range(n))


async def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise RuntimeError(f"{response.request.method} {response.request.url}: {response.status_code} {response.text}")
    return response


class Victim:
    """Tenant ``victim``: a few memories, records and a session, and the four operations it times."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.rng = random.Random(1)
        self.memory_ids: list[str] = []
        self.commits = 0

    async def prime(self) -> None:
        for _ in range(30):
            made = await _ok(await self.client.post("/memory-candidates", json=random_candidate(self.rng)))
            self.memory_ids.append(made.json()["memory_id"])
        for n in range(30):
            await _ok(await self.client.put(f"/records/todo/v{n}", json={"data": {
                "title": f"{short_note(self.rng)} 预算", "status": "open"}}))
        await _ok(await self.client.post("/sessions", json={"session_id": "victim"}))

    async def recall(self) -> None:
        await _ok(await self.client.post("/memory-query", json={"query": short_note(self.rng)}))

    async def get(self) -> None:
        await _ok(await self.client.get(f"/memories/{self.rng.choice(self.memory_ids)}"))

    async def search(self) -> None:
        query = f"预算 {self.rng.choice(['上海', '周报'])}"
        await _ok(await self.client.post("/resources/search", json={"query": query}))

    async def commit(self) -> None:
        self.commits += 1
        n = self.commits
        await _ok(await self.client.post("/sessions/victim/messages", json={"messages": [{
            "idempotency_key": f"v{n}", "role": "user", "content": f"我这周在上海出差，第{n}次", "created_at":
            "2026-07-01T10:00:00Z"}]}))
        await _ok(await self.client.post("/sessions/victim/commit", json={"commit_id": f"c{n}"}))
        while (await _ok(await self.client.get(f"/sessions/victim/commits/c{n}"))).json()["status"] not in TERMINAL:
            await asyncio.sleep(0.05)


async def _timed(op: Callable[[], Awaitable[None]]) -> float:
    began = time.perf_counter()
    await op()
    return (time.perf_counter() - began) * 1000


async def measure(victim: Victim, samples: int, commits: int) -> dict[str, list[float]]:
    """The victim's latencies (ms): ``samples`` of recall, get and search in turn, then ``commits`` commits."""
    out: dict[str, list[float]] = {op: [] for op in OPS}
    for _ in range(samples):
        for op in ("recall", "get", "search"):
            out[op].append(await _timed(getattr(victim, op)))
    for _ in range(commits):
        out["commit"].append(await _timed(victim.commit))
    return out


async def prime_attacker(client: httpx.AsyncClient, messages: int, records: int, memories: int) -> list[str]:
    rng = random.Random(2)
    await _ok(await client.post("/sessions", json={"session_id": "long"}))
    for start in range(0, messages, 500):
        batch = [{"idempotency_key": f"m{n}", "role": "user" if n % 2 else "assistant", "content": _cjk(rng, 200),
                  "created_at": "2026-07-01T10:00:00Z"} for n in range(start, min(messages, start + 500))]
        await _ok(await client.post("/sessions/long/messages", json={"messages": batch}))
    for n in range(records):
        await _ok(await client.put(f"/records/todo/a{n}", json={"data": {"title": _cjk(rng, 60), "status": "open",
                                                                          "notes": _cjk(rng, 300)}}))
    ids = []
    for _ in range(memories):
        ids.append((await _ok(await client.post("/memory-candidates", json=random_candidate(rng)))).json()["memory_id"])
    return ids


def attacks(memory_ids: list[str]) -> dict[str, Attack]:
    queue = list(memory_ids)

    async def window(client: httpx.AsyncClient, _rng: random.Random) -> httpx.Response:
        return await client.get("/sessions/long/window", params={"budget_tokens": 100_000})

    async def search(client: httpx.AsyncClient, rng: random.Random) -> httpx.Response:
        return await client.post("/resources/search", json={"query": _cjk(rng, 1_000)})

    async def deletion(client: httpx.AsyncClient, _rng: random.Random) -> httpx.Response:
        target = queue.pop() if queue else str(uuid.uuid4())  # once all are gone: no-op requests (404)
        response = await client.post("/deletion-requests", json={"deletion_request_id": f"d-{uuid.uuid4().hex}",
                                                                  "scope": {"type": "memory", "memory_id": target}})
        if response.status_code == 429:
            queue.append(target)  # still there: a later request deletes it
        return response

    async def recall(client: httpx.AsyncClient, rng: random.Random) -> httpx.Response:
        return await client.post("/memory-query", json={"query": long_cjk_query(rng)})

    return {"window": window, "search": search, "deletion": deletion, "recall": recall}


async def attacker(client: httpx.AsyncClient, attack: Attack, stop: asyncio.Event, statuses: Counter[str],
                   seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            response = await attack(client, rng)
        except httpx.HTTPError as exc:
            statuses[type(exc).__name__] += 1
            continue
        if response.status_code == 429:
            statuses[f"429 {response.json()['error']['code']}"] += 1
            await asyncio.sleep(float(response.headers.get("Retry-After", "1")) * rng.uniform(0.0, 0.2))
        else:
            statuses[str(response.status_code)] += 1


async def run(api_url: str, keys: dict[str, str], args: argparse.Namespace) -> None:
    async with _client(api_url, keys["victim"]) as victim_client, _client(api_url, keys["attacker"]) as prime_client:
        victim = Victim(victim_client)
        await victim.prime()
        memory_ids = await prime_attacker(prime_client, args.messages, args.records, args.memories)
        say(f"primed: attacker session of {args.messages} messages, {args.records} records, {args.memories} "
            f"memories; load average {os.getloadavg()[0]:.2f}")
        await measure(victim, 3, 1)  # warm-up (connections, caches, the embedding engine)
        idle = await measure(victim, args.samples, args.commits)
        results: dict[str, tuple[dict[str, list[float]], Counter[str]]] = {}
        for name, attack in attacks(memory_ids).items():
            if name not in args.attacks:
                continue
            stop, statuses = asyncio.Event(), Counter[str]()
            clients = [_client(api_url, keys["attacker"]) for _ in range(args.clients)]
            running = [asyncio.create_task(attacker(c, attack, stop, statuses, n)) for n, c in enumerate(clients)]
            await asyncio.sleep(args.warmup)  # the attack is in full swing before the victim is measured
            loaded = await measure(victim, args.samples, args.commits)
            stop.set()
            await asyncio.gather(*running)
            for c in clients:
                await c.aclose()
            results[name] = (loaded, statuses)
            say(f"  {name}: done; attacker's answers {dict(statuses)}; load average {os.getloadavg()[0]:.2f}")
            await asyncio.sleep(args.settle)  # what the attack queued (workflows) drains before the next one
    say(f"\n== victim p95 idle and under each attack (ratio to idle; target ≤ 2×); {args.samples} samples of "
        f"recall/get/search and {args.commits} commits per phase, attacker {args.clients} clients ==")
    say(f"{'operation':<8} {'idle p95':>10}  " + "  ".join(f"{name:>16}" for name in results))
    for op in OPS:
        base = percentile(idle[op], 0.95)
        cells = []
        for name in results:
            p95 = percentile(results[name][0][op], 0.95)
            cells.append(f"{p95:8.0f} ms {p95 / base:4.1f}×")
        say(f"{op:<8} {base:7.0f} ms  " + "  ".join(f"{cell:>16}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30, help="victim recalls, gets and searches per phase")
    parser.add_argument("--commits", type=int, default=4, help="victim commits per phase")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients of the attacker")
    parser.add_argument("--messages", type=int, default=2_000, help="messages of the attacker's long session")
    parser.add_argument("--records", type=int, default=300, help="attacker's CJK todo records")
    parser.add_argument("--memories", type=int, default=300, help="attacker's memories (deleted by the flood)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of attack before measuring")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between attacks")
    parser.add_argument("--attacks", nargs="+", choices=ATTACKS, default=list(ATTACKS), help="which attacks to run")
    args = parser.parse_args()
    os.environ.setdefault("MNEMO_SESSION_COMMIT_AFTER_MESSAGES", "0")
    os.environ.setdefault("MNEMO_SESSION_COMMIT_AFTER_TOKENS", "0")
    with services("mnemo-fairness-") as s:
        keys = {tenant: make_key(s.sqlalchemy_url, tenant, "u0", ROLES) for tenant in ("victim", "attacker")}
        say(f"stack ready ({s.api_url}); load average {os.getloadavg()[0]:.2f}")
        asyncio.run(run(s.api_url, keys, args))


if __name__ == "__main__":
    main()
