"""The sweeps' current code replays histories recorded from real runs of earlier code: before the sweeps shared one
tenants activity and one per-tenant loop (``-v1``), and before they listed only the tenants with work, a page at
a time (``-v2``, and the knowledge review's ``-v1``; ``workflows.sweeps.DUE_TENANTS``). A sweep in flight at a
deploy replays on the new code; with a Schedule that skips overlaps, one that failed to replay would hold back
every later sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from workflows.embedding import EmbeddingSweepWorkflow
from workflows.knowledge_review import KnowledgeReviewSweepWorkflow
from workflows.retention import RetentionSweepWorkflow
from workflows.session_commit import SessionCommitSweepWorkflow

HISTORIES = Path(__file__).parent / "histories"


@pytest.mark.parametrize(("name", "scheduled"), [
    ("embedding-sweep-v1", ["embedding_tenants", "embed_batch"]),
    ("retention-sweep-v1", ["retention_tenants", "retention_open_jobs"]),
    ("session-commit-sweep-v1", ["retention_tenants", "session_commit_sweep"]),
    ("embedding-sweep-v2", ["retention_tenants", "embed_batch", "embed_batch"]),
    ("retention-sweep-v2", ["retention_tenants", "retention_open_jobs", "retention_open_jobs"]),
    ("session-commit-sweep-v2", ["retention_tenants", "session_commit_sweep", "session_commit_sweep"]),
    ("knowledge-review-sweep-v1", ["retention_tenants", "knowledge_unreviewed", "knowledge_unreviewed"]),
])
async def test_a_sweep_recorded_by_earlier_code_replays(name: str, scheduled: list[str]) -> None:
    raw = json.loads((HISTORIES / f"{name}.json").read_text())
    events = raw["events"]
    assert [e["activityTaskScheduledEventAttributes"]["activityType"]["name"] for e in events
            if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"] == scheduled
    replayer = Replayer(workflows=[EmbeddingSweepWorkflow, RetentionSweepWorkflow, SessionCommitSweepWorkflow,
                                   KnowledgeReviewSweepWorkflow])
    result = await replayer.replay_workflow(WorkflowHistory.from_json(name, raw), raise_on_replay_failure=True)
    assert result.replay_failure is None
