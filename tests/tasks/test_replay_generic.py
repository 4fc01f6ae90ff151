"""The current workflow code replays histories recorded from tasks running pinned definitions: a data-only type
(compute → approval, rejected once and redrafted → publish; ``histories/record_generic.py`` records it) and one
whose draft an agent performs (agent → approval, rejected once and redrafted by the agent → publish;
``histories/record_agent.py``)."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from workflows.report_task import ReportTaskWorkflow
from workflows.task_support import DEFINITIONS_PATCH

HISTORY = Path(__file__).parent / "histories" / "data-only-v1.json"
AGENT_HISTORY = Path(__file__).parent / "histories" / "agent-v1.json"


def _decoded(payload: dict[str, Any]) -> Any:
    return json.loads(base64.b64decode(payload["data"]))


def _of(events: list[dict[str, Any]], kind: str, attributes: str) -> list[dict[str, Any]]:
    return [event[attributes] for event in events if event["eventType"] == f"EVENT_TYPE_{kind}"]


async def test_the_recorded_generic_history_replays_on_the_current_code() -> None:
    raw = json.loads(HISTORY.read_text())
    events = raw["events"]
    assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    [started] = _of(events, "WORKFLOW_EXECUTION_STARTED", "workflowExecutionStartedEventAttributes")
    assert _decoded(started["input"]["payloads"][0])["definition"]["version"] == "data-only-v1"  # pinned in the input
    markers = _of(events, "MARKER_RECORDED", "markerRecordedEventAttributes")
    assert DEFINITIONS_PATCH in [_decoded(m["details"]["patch-data"]["payloads"][0])["id"] for m in markers]
    history = WorkflowHistory.from_json("generic-replay", raw)
    outcome = await Replayer(workflows=[ReportTaskWorkflow]).replay_workflow(history, raise_on_replay_failure=True)
    assert outcome.replay_failure is None
    scheduled = Counter(a["activityType"]["name"]
                        for a in _of(events, "ACTIVITY_TASK_SCHEDULED", "activityTaskScheduledEventAttributes"))
    assert scheduled["task_run_step"] == 2  # the draft, then again after the rejection
    assert (scheduled["task_request_approval"], scheduled["task_publish"]) == (2, 1)


async def test_the_recorded_agent_history_replays_on_the_current_code() -> None:
    raw = json.loads(AGENT_HISTORY.read_text())
    events = raw["events"]
    assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    signals = _of(events, "WORKFLOW_EXECUTION_SIGNALED", "workflowExecutionSignaledEventAttributes")
    assert [signal["signalName"] for signal in signals] == ["agent_step_settled"] * 2
    history = WorkflowHistory.from_json("agent-replay", raw)
    outcome = await Replayer(workflows=[ReportTaskWorkflow]).replay_workflow(history, raise_on_replay_failure=True)
    assert outcome.replay_failure is None
    scheduled = Counter(a["activityType"]["name"]
                        for a in _of(events, "ACTIVITY_TASK_SCHEDULED", "activityTaskScheduledEventAttributes"))
    assert (scheduled["task_open_agent_step"], scheduled["task_collect_agent_step"]) == (2, 2)
    assert (scheduled["task_run_step"], scheduled["task_request_approval"], scheduled["task_publish"]) == (0, 2, 1)
