"""The ways into review besides the API: a promoted memory, a session commit's CASE or PATTERN, a finished task.

Each builds a :class:`~memory.knowledge.content.Proposal` through :func:`parse_proposal` (the same strict rules
as the API) with its origin; :func:`memory.knowledge.candidates.propose` caps its authority by that origin and by
the credential (:func:`memory.knowledge.content.ceiling`), so the model-made loop cannot close (seed 003 §9):

- a session commit's proposal is P3, always: a model's summary or inference is a candidate, never a fact;
- a promotion is at most P2 (a case that worked), and P3 from a key bound to an agent or of a model's
  inference (an E4 memory), whoever promotes it;
- a finished task's proposal is at most P2: its draft was approved by a person before it was published.
P0 and P1 (formal policy, owner-reviewed runbooks) come from documents through the API; a reviewer may raise a
proposal's authority when approving it — a person's decision, never the proposer's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore, ArtifactUnavailable, read
from memory.enums import Category, SourceLevel, Status
from memory.errors import Conflict, InvalidInput, NotFound
from memory.knowledge.candidates import Author, propose
from memory.knowledge.content import (
    KEY,
    MAX_CLAIM_CHARS,
    MAX_FIELD_CHARS,
    SOURCE_REF,
    Authority,
    Origin,
    Proposal,
    parse_proposal,
)
from memory.models import AuditEntry, Memory
from memory.tasks.artifacts import get_artifact
from memory.tasks.transitions import get_task

PROMOTABLE = frozenset({Category.CASE, Category.PATTERN, Category.TOOL_EXPERIENCE, Category.SKILL_EXECUTION})
"""What an agent learned doing work. A person's profile, preferences, entities and events are about them: they are
never proposed as the tenant's knowledge."""
PROMOTION_FIELDS = frozenset({"target", "skill_name", "claim", "key", "authority", "scope", "validity"})


def _refs(*refs: str) -> list[str]:
    return list(dict.fromkeys(r for r in refs if SOURCE_REF.fullmatch(r)))


def _scope_of(memory: Memory) -> dict[str, str]:
    """Where knowledge drawn from ``memory`` applies by default: its project, else the whole tenant."""
    return {"type": "PROJECT", "project_id": memory.project_id} if memory.project_id else {"type": "TENANT"}


def promotion(memory: Memory, body: Mapping[str, Any]) -> Proposal:
    """What ``POST /memories/{id}/promotions`` proposes for ``memory`` (the caller may see it: checked before)."""
    extra = sorted(set(body) - PROMOTION_FIELDS)
    if extra:
        raise InvalidInput(f"not a field of a promotion: {', '.join(extra)}", code="promotion_invalid",
                           details={"fields": extra, "allowed": sorted(PROMOTION_FIELDS)})
    if memory.category not in PROMOTABLE:
        raise InvalidInput(
            f"a {memory.category} memory is about a person, not knowledge: only "
            f"{', '.join(sorted(c.value for c in PROMOTABLE))} memories can be promoted",
            code="promotion_not_allowed", details={"category": memory.category})
    if memory.status != Status.ACTIVE.value:
        raise InvalidInput(f"only an ACTIVE memory can be promoted; this one is {memory.status}",
                           code="promotion_not_allowed", details={"status": memory.status})
    asked = body.get("authority", Authority.P2.value)
    if asked in (Authority.P0.value, Authority.P1.value):
        raise InvalidInput("a promoted memory is at most P2 (a confirmed case); formal policy (P0) and reviewed "
                           "runbooks (P1) are proposed from their documents with POST /knowledge-candidates",
                           code="promotion_authority_too_high", details={"authority": asked})
    proposal = parse_proposal({
        "claim": body.get("claim", memory.content), "key": body.get("key", memory.key), "authority": asked,
        "scope": body.get("scope") or _scope_of(memory), "validity": body.get("validity"),
        "target": body.get("target", "knowledge"),
        **({"skill_name": body["skill_name"]} if "skill_name" in body else {}),
        "source_refs": _refs(f"memory:{memory.memory_id}", memory.source_id, *memory.evidence_refs),
        "evidence": [{"quote": memory.content[:MAX_FIELD_CHARS], "ref": f"memory:{memory.memory_id}"}],
    }, origin=Origin.PROMOTION, origin_ref=f"memory:{memory.memory_id}@{memory.version}")
    if memory.source_level == SourceLevel.E4.value:  # a model's inference, whoever promotes it
        return replace(proposal, authority=Authority.P3)
    return proposal


def from_session_commit(memory: Memory, session_id: str, commit_id: str) -> Proposal:
    """A CASE or PATTERN a session commit wrote, proposed for review as P3: what a conversation concluded."""
    claim = memory.content if len(memory.content) <= MAX_CLAIM_CHARS else memory.abstract
    return parse_proposal({
        "claim": claim, "key": memory.key if memory.key and KEY.fullmatch(memory.key) else None,
        "authority": Authority.P3.value,
        "scope": _scope_of(memory),
        "source_refs": _refs(f"memory:{memory.memory_id}", f"session:{session_id}", f"commit:{commit_id}",
                             *memory.evidence_refs),
    }, origin=Origin.SESSION_COMMIT, origin_ref=f"commit:{commit_id}")


def from_task(task_id: str, artifact_sha256: str, body: Mapping[str, Any]) -> Proposal:
    """The ``knowledge`` object of a task's published final artifact (a person approved the draft): at most P2,
    resting on the task and the exact artifact it was published from."""
    if not isinstance(body, Mapping):
        raise InvalidInput("the final artifact's knowledge must be an object", code="knowledge_candidate_invalid")
    refs = body.get("source_refs", [])
    return parse_proposal(
        {**body, "source_refs": [f"task:{task_id}", f"artifact:{artifact_sha256}",
                                 *(refs if isinstance(refs, list) else [])]},
        origin=Origin.TASK, origin_ref=f"task:{task_id}")


CASE_LIKE = frozenset({Category.CASE.value, Category.PATTERN.value})
"""The categories a session commit proposes for review (issue 27 §1)."""


def propose_from_commit(
    session: Session, author: Author, written: Sequence[Mapping[str, Any]], session_id: str, commit_id: str,
    now: datetime,
) -> dict[str, int]:
    """Open a P3 candidate for each CASE or PATTERN a commit created or merged (idempotent per commit and memory);
    the counts for the commit's stats. One already published is counted, not proposed again."""
    counts = {"knowledge_candidates": 0, "knowledge_already_published": 0}
    for entry in written:
        if entry.get("category") not in CASE_LIKE or entry.get("decision") not in ("CREATE", "MERGE") \
                or "memory_id" not in entry:
            continue
        memory = session.get(Memory, (author.tenant_id, uuid.UUID(str(entry["memory_id"])), int(entry["version"])))
        if memory is None or memory.status not in (Status.ACTIVE.value, Status.CANDIDATE.value):
            continue
        try:
            with session.begin_nested():
                propose(session, author, from_session_commit(memory, session_id, commit_id), now,
                        idempotency_key=f"commit:{commit_id}:memory:{memory.memory_id}@{memory.version}")
        except Conflict as exc:
            if exc.code != "knowledge_already_published":
                raise
            counts["knowledge_already_published"] += 1
        else:
            counts["knowledge_candidates"] += 1
    return counts


MAX_TASK_PROPOSALS = 10


def propose_from_task(
    session: Session, store: ArtifactStore, tenant_id: str, task_id: str, artifact_sha256: str, now: datetime,
) -> list[str]:
    """Open candidates from the ``knowledge`` object (or list) of a task's published JSON artifact; the outcome of
    each as a short code (``opened``, or why not). The artifact was already published: a proposal that fails the
    rules is recorded in the audit log by its code, never fails the task. Idempotent per task and position."""
    artifact = get_artifact(session, tenant_id, task_id, artifact_sha256)
    if artifact.media_type.split(";")[0].strip() != "application/json":
        return []
    try:
        body = json.loads(read(store, artifact_sha256))
    except (ValueError, ArtifactUnavailable):
        return []
    wanted = body.get("knowledge") if isinstance(body, dict) else None
    proposals = wanted if isinstance(wanted, list) else [wanted] if wanted is not None else []
    owner = get_task(session, tenant_id, task_id).owner_user_id
    outcomes: list[str] = []
    for position, item in enumerate(proposals[:MAX_TASK_PROPOSALS]):
        try:
            with session.begin_nested():
                propose(session, Author(tenant_id, owner), from_task(task_id, artifact_sha256, item), now,
                        idempotency_key=f"task:{task_id}:{artifact_sha256}:{position}")
            outcomes.append("opened")
        except (InvalidInput, Conflict, NotFound) as exc:
            outcomes.append(exc.code or type(exc).__name__)
    session.add(AuditEntry(tenant_id=tenant_id, actor=owner, action="KNOWLEDGE_PROPOSED_BY_TASK",
                           detail={"task_id": task_id, "artifact_sha256": artifact_sha256, "outcomes": outcomes}))
    return outcomes
