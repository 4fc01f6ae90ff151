"""``POST /memories/{id}/promotions``: a memory proposed as knowledge or as a change to a skill opens a candidate and
its review — never a direct write — and the answer says what was proposed and where it waits. Real PostgreSQL, a real
Temporal worker, the real API."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from api.settings import Settings
from memory.db import tenant_session
from memory.knowledge.models import KnowledgeItem
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.workers import api_with_worker

LESSON = "sales_query needs the month as YYYY-MM; '2026年6月' fails with a 400. Ask ops at ops@example.com."


@pytest.fixture(scope="module")
def api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with api_with_worker(settings, engine, "kpromo") as client:
        yield client


@dataclass(frozen=True)
class Team:
    tenant: str
    agent: str
    person: str
    reviewer: str


@pytest.fixture()
def team(make_key: MakeKey) -> Team:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    return Team(tenant, make_key(tenant=tenant, user="alice", agent="report-agent", roles=("memory_writer",)),
                make_key(tenant=tenant, user="alice", roles=("memory_writer",)),
                make_key(tenant=tenant, user="bob", roles=("knowledge_reviewer",)))


def memory(api: TestClient, api_key: str, category: str = "TOOL_EXPERIENCE", level: str = "E2", **extra: Any) -> str:
    body = candidate(LESSON, category=category, space="AGENT" if category != "PREFERENCE" else "USER",
                     source_level=level, **extra)
    written = api.post("/memory-candidates", json=body, headers=auth(api_key))
    assert written.status_code == 201, written.text
    return str(written.json()["memory_id"])


def promote(api: TestClient, key: str, memory_id: str, expected: int = 201, **body: Any) -> dict[str, Any]:
    answer = api.post(f"/memories/{memory_id}/promotions", json=body, headers=auth(key))
    assert answer.status_code == expected, answer.text
    return dict(answer.json())


def test_a_promotion_opens_a_reviewed_candidate_and_writes_nothing_until_approved(
        api: TestClient, team: Team, engine: Engine) -> None:
    memory_id = memory(api, team.agent, key="tool.sales_query.month_format")
    answer = promote(api, team.agent, memory_id)
    waits = answer["waits"]
    assert waits["status"] == "PENDING_REVIEW" and waits["console"].startswith("/console/knowledge/")
    assert answer["proposed"]["source_refs"][0] == f"memory:{memory_id}"
    assert answer["proposed"]["authority"] == "P3" and answer["authority_capped"]  # an agent's key proposes P3
    assert "ops@example.com" not in answer["proposed"]["claim"]
    assert answer["candidate"]["redactions"] == [{"kind": "email", "path": "claim"},
                                                 {"kind": "email", "path": "evidence/0/quote"}]
    with tenant_session(engine, team.tenant) as session:
        assert session.scalar(select(func.count()).select_from(KnowledgeItem)) == 0
    again = promote(api, team.agent, memory_id, expected=200)
    assert again["candidate"]["candidate_id"] == answer["candidate"]["candidate_id"]

    shown = api.get(answer["waits"]["api"], headers=auth(team.reviewer)).json()
    decided = api.post(f"{answer['waits']['api']}/reviews", headers=auth(team.reviewer), json={
        "decision": "approve", "content_sha256": shown["content_sha256"], "state_version": shown["state_version"],
        "authority": "P2"})  # a person classifies it: a case that worked
    assert decided.status_code == 200, decided.text
    published = decided.json()["knowledge"]
    assert published["source_refs"][0] == f"memory:{memory_id}" and published["authority"] == "P2"


def test_an_agent_promoting_a_models_inference_proposes_it_as_p3(api: TestClient, team: Team) -> None:
    memory_id = memory(api, team.agent, category="CASE", level="E4")
    unconfirmed = api.post(f"/memories/{memory_id}/promotions", json={}, headers=auth(team.agent))
    assert unconfirmed.json()["error"]["code"] == "promotion_not_allowed"  # a CANDIDATE: not a case that worked
    confirmed = api.post(f"/memory-candidates/{memory_id}/confirm", headers=auth(team.agent))
    assert confirmed.status_code == 200, confirmed.text
    answer = promote(api, team.agent, memory_id)
    assert answer["proposed"]["authority"] == "P3" and answer["authority_capped"]


def test_what_cannot_be_promoted_says_why(api: TestClient, team: Team, make_key: MakeKey) -> None:
    memory_id = memory(api, team.agent)
    for body, code in [({"authority": "P0"}, "promotion_authority_too_high"),
                       ({"colour": "red"}, "promotion_invalid"),
                       ({"target": "skill"}, "knowledge_candidate_invalid")]:
        refused = api.post(f"/memories/{memory_id}/promotions", json=body, headers=auth(team.agent))
        assert (refused.status_code, refused.json()["error"]["code"]) == (422, code), refused.text
    preference = memory(api, team.person, category="PREFERENCE")
    refused = api.post(f"/memories/{preference}/promotions", json={}, headers=auth(team.person))
    assert refused.json()["error"]["code"] == "promotion_not_allowed"
    for outsider in (team.person, make_key(user="mallory", roles=("admin",))):  # not the agent's; another tenant
        missing = api.post(f"/memories/{memory_id}/promotions", json={}, headers=auth(outsider))
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")


def test_a_skill_change_is_reviewed_and_approving_it_writes_no_knowledge(
        api: TestClient, team: Team, engine: Engine) -> None:
    memory_id = memory(api, team.agent)
    answer = promote(api, team.agent, memory_id, target="skill", skill_name="monthly-report",
                     claim="Ask for the month as YYYY-MM before running sales_query")
    assert (answer["target"], answer["skill_name"]) == ("skill", "monthly-report")
    shown = api.get(answer["waits"]["api"], headers=auth(team.reviewer)).json()
    decided = api.post(f"{answer['waits']['api']}/reviews", headers=auth(team.reviewer), json={
        "decision": "approve", "content_sha256": shown["content_sha256"], "state_version": shown["state_version"]})
    assert decided.status_code == 200 and decided.json()["candidate"]["status"] == "APPROVED"
    assert decided.json()["knowledge"] is None
    with tenant_session(engine, team.tenant) as session:
        assert session.scalar(select(func.count()).select_from(KnowledgeItem)) == 0
