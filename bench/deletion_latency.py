"""Deletion latency on the real embedded stack: DELETE → barrier, and DELETE → verified purge.

Starts the same stack as ``mnemo dev`` (PostgreSQL, Temporal, worker, API) in a
temporary data dir, writes N memories, deletes them one request at a time, and
reports p50/p95 of:

- the DELETE round trip, inside which the barrier commits (checked: the very
  next GET of the memory must be a 404, every time);
- the purge, from the barrier's commit to the job's completion (database
  timestamps ``barrier_at`` → ``completed_at``, so polling adds no bias);
- as the baseline, measured in the same run: a plain write (POST /memory-candidates).

Usage: ``.venv/bin/python -m bench.deletion_latency [--n 200]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx
import psycopg

from bench.corpus import candidate
from bench.harness import dev_stack, libpq_url, percentile, say


def summary(name: str, values_ms: list[float]) -> str:
    return (
        f"{name:<34} n={len(values_ms):<4} p50={percentile(values_ms, 0.5):8.1f} ms  "
        f"p95={percentile(values_ms, 0.95):8.1f} ms  max={max(values_ms):8.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()

    with dev_stack("mnemo-bench-") as stack:
        key = stack.key_path.read_text().strip()
        client = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        write_ms, ids = [], []
        for n in range(args.n):
            body = candidate(f"基准测试记忆 {n}：用户在第{n}个项目里偏好周报用表格", f"bench-{n}", source_type="BENCH",
                             captured_at="2026-06-01T00:00:00Z")
            started = time.perf_counter()
            response = client.post("/memory-candidates", json=body)
            write_ms.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            ids.append(response.json()["memory_id"])

        request_ms, barrier_ms, jobs, leaks = [], [], [], 0
        for memory_id in ids:
            started = time.perf_counter()
            response = client.delete(f"/memories/{memory_id}")
            request_ms.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            barrier_ms.append(_server_timing(response.headers["server-timing"], "barrier"))
            jobs.append(response.json()["job_id"])
            if client.get(f"/memories/{memory_id}").status_code != 404:
                leaks += 1

        assert stack.settings is not None and stack.settings.database_url is not None
        conninfo = libpq_url(stack.settings.database_url)
        deadline = time.monotonic() + 600
        with psycopg.connect(conninfo) as conn:
            while True:
                done = conn.execute(
                    "SELECT count(*) FROM deletion_jobs WHERE status = 'completed'"
                ).fetchone()
                if done and done[0] >= len(jobs):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {done} of {len(jobs)} deletions completed within 10 minutes")
                time.sleep(0.5)
            purge_ms = [
                float(row[0])
                for row in conn.execute(
                    "SELECT extract(epoch FROM completed_at - barrier_at) * 1000 FROM deletion_jobs"
                ).fetchall()
            ]
            first_barrier, last_completion = conn.execute(
                "SELECT min(barrier_at), max(completed_at) FROM deletion_jobs"
            ).fetchone()  # type: ignore[misc]
        wall = (last_completion - first_barrier).total_seconds()

        say(f"mnemo deletion benchmark: {args.n} memories, one DELETE at a time, 2-core machine")
        say(summary("baseline: POST /memory-candidates", write_ms))
        say(summary("barrier transaction (Server-Timing)", barrier_ms))
        say(summary("DELETE request (barrier + schedule)", request_ms))
        say(summary("barrier → verified purge complete", purge_ms))
        say(
            f"barrier / write ratio (p50): {statistics.median(barrier_ms) / statistics.median(write_ms):.2f}; "
            f"DELETE request / write ratio (p50): {statistics.median(request_ms) / statistics.median(write_ms):.2f}; "
            f"reads that still saw a deleted memory right after its DELETE: {leaks}"
        )
        say(f"throughput: {len(jobs) / wall:.1f} verified deletions/s over {wall:.1f} s")


def _server_timing(header: str, name: str) -> float:
    """The ``dur`` of one metric in a Server-Timing header, in ms."""
    for metric in header.split(","):
        label, _, duration = metric.strip().partition(";dur=")
        if label == name:
            return float(duration)
    raise ValueError(f"no {name} in Server-Timing: {header}")


if __name__ == "__main__":
    main()
