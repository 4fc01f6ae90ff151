"""The deletion workflow's current code replays a history recorded from a real run of the code before verification
rounds (``memory/deletion/rounds.py``), which scanned the histories in an activity of its own before ``finish``. A
deletion in flight at a deploy must finish on the new code, not fail its workflow task for ever."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from workflows.deletion import DeletionWorkflow

HISTORIES = Path(__file__).parent / "histories"


async def test_a_deletion_recorded_before_rounds_replays() -> None:
    raw = json.loads((HISTORIES / "deletion-v1.json").read_text())
    scheduled = [e["activityTaskScheduledEventAttributes"]["activityType"]["name"] for e in raw["events"]
                 if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"]
    assert scheduled == ["deletion_begin", "deletion_purge", "deletion_scan_histories", "deletion_finish"]
    result = await Replayer(workflows=[DeletionWorkflow]).replay_workflow(
        WorkflowHistory.from_json("deletion-v1", raw), raise_on_replay_failure=True)
    assert result.replay_failure is None
