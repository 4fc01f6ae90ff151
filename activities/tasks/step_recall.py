"""A step's ``recall``: the memory bundle of the task's owner for the step's query, read when the step runs.

Recall sits above tasks in memory's layering, so the activity asks for it and hands the step the bundle
(:func:`memory.recall.render.step_view`). The query may quote the goal (``{{goal.service}}``, rendered as an llm
prompt is); the recall is audited as the owner's, with the task named as the reader.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from activities.db import shielded_session
from activities.tasks.payloads import RunStepInput
from memory.identity.auth import PrincipalContext
from memory.recall.plan import Intent
from memory.recall.render import step_view
from memory.recall.service import RecallOptions, recall
from memory.tasks.llm_steps import render_prompt


def step_bundle(engine: Engine, req: RunStepInput) -> dict[str, Any] | None:
    """The bundle the step asked for, or None when its definition has no ``recall``."""
    asked = req.spec.get("recall")
    if not asked:
        return None
    query = render_prompt(str(asked["query"]), req.goal, {}, None)
    reader = PrincipalContext(req.tenant_id, req.owner_user_id, None, frozenset(), f"task:{req.task_id}")
    options = RecallOptions(intent=Intent(asked.get("intent", Intent.ANSWER.value)))
    with shielded_session(engine, req.tenant_id) as session:
        bundle = recall(session, reader, query, datetime.now(UTC), options)
    return step_view(bundle)
