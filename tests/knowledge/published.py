"""Published knowledge for tests: a candidate opened with ``propose`` and approved with ``publish`` (the review
workflow is another package's; these are the domain calls it makes)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from memory.db import tenant_session
from memory.knowledge.candidates import Author, get_candidate, propose
from memory.knowledge.content import parse_proposal
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.knowledge.publish import publish

POLICY: Mapping[str, Any] = {
    "key": "report.publish_policy", "claim": "报告发布前必须获得财务审批", "authority": "P0",
    "scope": {"type": "TENANT"}, "source_refs": ["doc:finance/handbook#4.2"],
}


def open_candidate(engine: Engine, tenant: str, body: Mapping[str, Any], now: datetime,
                   author: str = "alice") -> KnowledgeCandidate:
    with tenant_session(engine, tenant) as session:
        return propose(session, Author(tenant, author), parse_proposal(body), now).candidate


def approve(engine: Engine, tenant: str, candidate: KnowledgeCandidate, now: datetime,
            reviewer: str = "rita") -> KnowledgeItem:
    with tenant_session(engine, tenant) as session:
        return publish(session, get_candidate(session, tenant, candidate.candidate_id, lock=True), reviewer, now,
                       None)


def published(engine: Engine, tenant: str, body: Mapping[str, Any], now: datetime) -> KnowledgeItem:
    """``body`` proposed by alice and approved by rita."""
    return approve(engine, tenant, open_candidate(engine, tenant, body, now), now)
