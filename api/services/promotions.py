"""``POST /memories/{id}/promotions`` (seed 001 §8): a memory proposed as knowledge or as a change to a skill.

A promotion opens a knowledge candidate and starts its review (:func:`api.services.knowledge.open_and_review`):
nothing is written to knowledge or to a skill until a knowledge reviewer who is not the promoter approves it.
What may be promoted and with what authority is :func:`memory.knowledge.sources.promotion`. Promoting the same
memory version with the same body again answers the same candidate.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from api.schemas.knowledge import PromotionOut, WaitsOut
from api.services.client import ClientSource
from api.services.knowledge import author_of, created_out, open_and_review
from memory.db import tenant_session
from memory.identity.auth import PrincipalContext
from memory.knowledge.content import Proposal
from memory.knowledge.sources import promotion
from memory.store import memories
from workflows.knowledge_review import workflow_id
from workflows.report_task import ApprovalPolicy


async def promote(temporal: ClientSource, engine: Engine, task_queue: str, policy: ApprovalPolicy,
                  principal: PrincipalContext, memory_id: uuid.UUID, body: dict[str, Any]) -> tuple[PromotionOut, bool]:
    """The promotion's answer, and whether it opened a new candidate (False: the same promotion again)."""

    def proposal() -> tuple[Proposal, int]:
        with tenant_session(engine, principal.tenant_id) as session:
            memory = memories.head_of(session, principal, memory_id)  # another's or invisible: the same 404
            return promotion(memory, body), memory.version

    proposed_content, version = await run_in_threadpool(proposal)
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    key = f"promotion:{memory_id}@{version}:{principal.agent_id or ''}:{digest}"  # an agent's key proposes P3
    proposed = await open_and_review(temporal, engine, task_queue, policy, author_of(principal), proposed_content,
                                     idempotency_key=key)
    c = proposed.candidate
    asked = body.get("authority", "P2")
    answer = PromotionOut(
        memory_id=str(memory_id), memory_version=version, target=c.target, skill_name=c.skill_name,
        candidate=await run_in_threadpool(created_out, engine, c),
        proposed={"key": c.key, "claim": c.claim, "authority": c.authority,
                  "scope": {"type": c.scope_type, "project_id": c.project_id}, "source_refs": list(c.source_refs)},
        authority_capped=c.authority != asked,
        waits=WaitsOut(status=c.status, review_workflow_id=workflow_id(c.tenant_id, str(c.candidate_id)),
                       api=f"/knowledge-candidates/{c.candidate_id}", console=f"/console/knowledge/{c.candidate_id}",
                       review_deadline=c.review_deadline),
    )
    return answer, proposed.created
