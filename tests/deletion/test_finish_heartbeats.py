"""A deletion's verification heartbeats while it runs (found by bench/chaos.py).

``deletion_finish`` is one transaction and had only its 10-minute start-to-close timeout: after a
worker was killed during it, the job stayed ``running`` for ten minutes. It heartbeated from a
helper thread (``activities.db.heartbeating``, still used by the session commit's extraction); it now awaits its
round with ``heartbeat_while`` (tests/test_heartbeat_while.py), and the workflow gives it a heartbeat timeout.
"""

from __future__ import annotations

import threading

from temporalio.testing import ActivityEnvironment

from activities.db import heartbeating


def test_heartbeats_flow_while_the_block_runs_and_stop_after() -> None:
    beats: list[tuple[object, ...]] = []
    first = threading.Event()
    env = ActivityEnvironment()

    def on_heartbeat(*details: object) -> None:
        beats.append(details)
        first.set()

    env.on_heartbeat = on_heartbeat

    def activity_body() -> int:
        with heartbeating(every_seconds=0.01):
            assert first.wait(10), "no heartbeat while the block ran"
        return len(beats)

    inside = env.run(activity_body)
    assert inside >= 1
    # The helper thread was joined when the block ended: nothing heartbeats for the activity afterwards.
    assert not [t for t in threading.enumerate() if t.name == "mnemo-heartbeat"]


def test_outside_an_activity_it_does_nothing() -> None:
    with heartbeating(every_seconds=0.01):
        pass
