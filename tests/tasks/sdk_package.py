"""A throwaway team package written with mnemo's SDK alone, as a team would: a data-only task type of three steps
(write a digest → approve it → publish it), its version and text chosen by the test that writes it."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

MODULE = '''
"""{task_type}: a digest of the goal's topic, approved, then published."""
from mnemo_sdk_example_marker import VERSION_NOTE  # noqa: F401  (proves the team's own imports work)
from memory.tasks.sdk import ProducedArtifact, StepContext, StepOutcome, TaskType

DIGEST = TaskType(
    "{task_type}",
    "{version}",
    {{"type": "object", "additionalProperties": False, "required": ["topic"],
      "properties": {{"topic": {{"type": "string", "minLength": 1}}}}}},
    redraft_step="write",
)
{outline}

@DIGEST.compute("write")
def write(ctx: StepContext) -> StepOutcome:
    text = f"{heading} {{ctx.goal['topic']}}, revision {{ctx.extra.get('revision', 1)}}"
    if ctx.extra.get("reviewer_note"):
        text += f" (after review: {{ctx.extra['reviewer_note']}})"
    return StepOutcome({{"chars": len(text)}}, [ProducedArtifact("digest.md", "draft", "text/markdown", text.encode())])


DIGEST.approval("review", artifact_from="write/digest.md")
DIGEST.publish("send", destination="reports")
'''


OUTLINE = '''

@DIGEST.compute("outline")
def outline(ctx: StepContext) -> StepOutcome:
    return StepOutcome({"words": len(ctx.goal["topic"].split())})
'''


def write_package(root: Path, *, task_type: str, version: str = "1", heading: str = "Digest of") -> str:
    """Write the module under ``root`` (put on ``sys.path``); its importable name. Version 2 and later add an
    ``outline`` step before ``write``."""
    name = f"team_tasks_{uuid.uuid4().hex[:8]}"
    (root / "mnemo_sdk_example_marker.py").write_text('VERSION_NOTE = "a module of the team\'s own"\n')
    rewrite(root, name, task_type=task_type, version=version, heading=heading)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return name


def rewrite(root: Path, name: str, *, task_type: str, version: str, heading: str) -> None:
    outline = OUTLINE if version != "1" else ""
    (root / f"{name}.py").write_text(MODULE.format(task_type=task_type, version=version, heading=heading,
                                                   outline=outline))
