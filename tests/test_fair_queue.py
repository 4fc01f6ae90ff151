"""The query-embedding queue serves tenants in turn (issue 12, finding 8; bench/load.py's abuse phase).

Behind the former FIFO thread, a tenant with a backlog of long embeddings delayed every other
tenant's by the whole backlog. The order is what is tested, never a duration.
"""

from __future__ import annotations

import threading

from api.limits import FairQueue


def test_another_tenant_waits_for_one_job_of_the_backlog_at_most() -> None:
    queue = FairQueue("test-fair")
    gate, started = threading.Event(), threading.Event()
    order: list[str] = []

    def job(_lane: int, name: str) -> str:
        if name == "a0":
            started.set()
            gate.wait(10)  # the abuser's first job is running while the others queue
        order.append(name)
        return name

    first = queue.submit("abuser", job, "a0")
    assert started.wait(10)
    backlog = [queue.submit("abuser", job, f"a{n}") for n in range(1, 5)]
    normal = queue.submit("normal", job, "n0")
    gate.set()
    assert normal.result(10) == "n0"
    for future in [first, *backlog]:
        future.result(10)
    # a0 was running; the abuser's turn came back before the normal tenant arrived: a1, then n0.
    assert order == ["a0", "a1", "n0", "a2", "a3", "a4"]


def test_a_cancelled_job_is_skipped_and_errors_reach_the_caller() -> None:
    queue = FairQueue("test-fair-2")
    gate = threading.Event()
    ran: list[str] = []
    blocker = queue.submit("t", lambda _lane: gate.wait(10))
    cancelled = queue.submit("t", lambda _lane, x: ran.append(x), "cancelled")
    assert cancelled.cancel()
    failing = queue.submit("u", lambda _lane: 1 / 0)
    gate.set()
    blocker.result(10)
    try:
        failing.result(10)
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("the job's exception must reach its future")
    assert queue.submit("t", lambda _lane, x: ran.append(x), "after").result(10) is None
    assert ran == ["after"]


def test_with_two_lanes_one_tenant_holds_one_lane_and_another_starts_at_once() -> None:
    queue = FairQueue("test-fair-3", lanes=2)
    gate, started = threading.Event(), threading.Event()
    running: list[tuple[str, int]] = []

    def slow(lane: int, name: str) -> str:
        running.append((name, lane))
        started.set()
        gate.wait(10)
        return name

    first = queue.submit("abuser", slow, "a0")
    backlog = [queue.submit("abuser", slow, f"a{n}") for n in range(1, 4)]
    assert started.wait(10)
    # The abuser's backlog waits for its own running job, not on the free lane: the normal tenant gets it.
    normal = queue.submit("normal", lambda lane: ("n0", lane))
    name, lane = normal.result(10)
    assert name == "n0" and lane != running[0][1]
    assert [n for n, _ in running] == ["a0"]
    gate.set()
    assert [f.result(10) for f in [first, *backlog]] == ["a0", "a1", "a2", "a3"]


def test_closing_cancels_the_queued_jobs_and_stops_the_lanes() -> None:
    queue = FairQueue("test-fair-4", lanes=2)
    gate, started = threading.Event(), threading.Event()

    def slow(_lane: int) -> str:
        started.set()
        gate.wait(10)
        return "done"

    running = queue.submit("t", slow)
    assert started.wait(10)
    queued = queue.submit("t", slow)  # behind its tenant's running job
    closer = threading.Thread(target=queue.close)
    closer.start()
    gate.set()
    closer.join(10)
    assert not closer.is_alive() and not any(thread.is_alive() for thread in queue.threads)
    assert running.result(10) == "done" and queued.cancelled()
