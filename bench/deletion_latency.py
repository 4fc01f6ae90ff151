"""Deletion latency on the real embedded stack: DELETE → barrier, and DELETE → verified purge.

Starts the same stack as ``mnemo dev`` (PostgreSQL, Temporal, worker, API) in a
temporary data dir, writes N memories, deletes them one request at a time, and
reports p50/p95 of:

- the DELETE round trip, inside which the barrier commits (checked: the very
  next GET of the memory must be a 404, every time);
- the purge, from the barrier's commit to the job's completion (database
  timestamps ``barrier_at`` → ``completed_at``, so polling adds no bias);
- as the baseline, measured in the same run: a plain write (POST /memory-candidates).

Usage: ``.venv/bin/python bench/deletion_latency.py [--n 200]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.devstack.processes import free_port  # noqa: E402
from api.devstack.stack import DevOptions, DevStack  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary(name: str, values_ms: list[float]) -> str:
    return (
        f"{name:<34} n={len(values_ms):<4} p50={percentile(values_ms, 0.5):8.1f} ms  "
        f"p95={percentile(values_ms, 0.95):8.1f} ms  max={max(values_ms):8.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="mnemo-bench-"))
    temporal_port = free_port()
    while not all(_free(p) for p in (temporal_port, temporal_port + 1000)):
        temporal_port = free_port()
    stack = DevStack(DevOptions(data_dir=data_dir, port=free_port(), temporal_port=temporal_port, demo=False))
    stack.start()
    try:
        key = stack.key_path.read_text().strip()
        client = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        write_ms, ids = [], []
        for n in range(args.n):
            body = {
                "category": "PROFILE",
                "space": "USER",
                "content": f"基准测试记忆 {n}：用户在第{n}个项目里偏好周报用表格",
                "source": {"source_id": f"bench-{n}", "source_type": "BENCH", "captured_at": "2026-06-01T00:00:00Z"},
                "source_level": "E2",
            }
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
        conninfo = stack.settings.database_url.replace("postgresql+psycopg://", "postgresql://")
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

        print(f"mnemo deletion benchmark: {args.n} memories, one DELETE at a time, 2-core machine")
        print(summary("baseline: POST /memory-candidates", write_ms))
        print(summary("barrier transaction (Server-Timing)", barrier_ms))
        print(summary("DELETE request (barrier + schedule)", request_ms))
        print(summary("barrier → verified purge complete", purge_ms))
        print(
            f"barrier / write ratio (p50): {statistics.median(barrier_ms) / statistics.median(write_ms):.2f}; "
            f"DELETE request / write ratio (p50): {statistics.median(request_ms) / statistics.median(write_ms):.2f}; "
            f"reads that still saw a deleted memory right after its DELETE: {leaks}"
        )
        print(f"throughput: {len(jobs) / wall:.1f} verified deletions/s over {wall:.1f} s")
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def _server_timing(header: str, name: str) -> float:
    """The ``dur`` of one metric in a Server-Timing header, in ms."""
    for metric in header.split(","):
        label, _, duration = metric.strip().partition(";dur=")
        if label == name:
            return float(duration)
    raise ValueError(f"no {name} in Server-Timing: {header}")


def _free(port: int) -> bool:
    from api.devstack.processes import port_is_free

    return port_is_free(port)


if __name__ == "__main__":
    main()
