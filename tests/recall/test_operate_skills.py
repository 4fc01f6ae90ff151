"""An operational request's bundle carries the caller's resolved skills in a quota of their own (seed 004 §9.1;
issue 27, item 5); a question's does not, and skills never become memories (seed 004 P10)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from memory.db import tenant_session
from memory.recall.plan import DEFAULT_SKILL_BUDGET, Intent, SourceSpec, SourceType, classify_intent, make_plan
from memory.tokens import count_tokens
from tests.conftest import MakeKey, auth
from tests.recall.conftest import recall, write


@pytest.mark.parametrize("query", [
    "Generate the June monthly report in CNY", "please draft the incident digest for week 23",
    "Publish the approved report", "run monthly-report for 2026-06", "帮我生成六月的月报", "发布上个月的月报",
    "请起草本周的事故周报",
])
def test_an_imperative_to_do_the_work_is_an_operation_in_english_and_chinese(query: str) -> None:
    assert classify_intent(query, None) is Intent.OPERATE


@pytest.mark.parametrize("query", [
    "how do I publish the report?", "what did the report generate last month?", "running costs in June",
    "怎么发布月报？", "上个月的月报生成了吗", "what does the draft say?",
])
def test_a_question_about_the_work_stays_an_answer(query: str) -> None:
    assert classify_intent(query, None) is Intent.ANSWER


def test_only_an_operation_plans_the_skills_source_with_its_own_quota() -> None:
    assert classify_intent("generate the report", "task-1") is Intent.RESUME_TASK  # a task id still wins
    assert classify_intent("thanks", None) is Intent.CHITCHAT
    operate = make_plan(Intent.OPERATE, skill_budget=300)
    assert operate.reads(SourceType.SKILLS) == SourceSpec(SourceType.SKILLS, 3)
    assert operate.reads(SourceType.MEMORY) is not None and (operate.skill_budget, operate.token_budget) == (300, 1_500)
    assert all(make_plan(i).reads(SourceType.SKILLS) is None for i in (Intent.ANSWER, Intent.CHITCHAT,
                                                                       Intent.RESUME_TASK))


def _skill_tokens(skill: dict[str, Any]) -> int:
    return count_tokens(skill["name"]) + sum(
        count_tokens(f["value"] if isinstance(f["value"], str) else "\n".join(f["value"])) for f in skill["fields"])


def _memories(engine: Engine, tenant: str) -> int:
    with tenant_session(engine, tenant) as session:
        return int(session.execute(text("SELECT count(*) FROM memories")).scalar_one())


def test_an_operation_bundles_the_resolved_skill_within_its_quota_and_a_question_does_not(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    agent = make_key(tenant=tenant, user="alice", roles=("memory_writer",), agent="reporter")
    overlay = "---\nname: monthly-report\nversion: 'r1'\nconstraints: [Write the summary in Chinese.]\n---\n"
    pushed = client.post("/skills", json={"space": "AGENT", "files": {"SKILL.md": overlay}}, headers=auth(agent))
    assert pushed.status_code == 201, pushed.text
    tenant_layer = "---\nname: monthly-report\nversion: 't1'\n---\n## Strategy\nStart from last month's report.\n"
    pushed = client.post("/skills", json={"space": "TENANT", "files": {"SKILL.md": tenant_layer}}, headers=auth(admin))
    assert pushed.status_code == 201, pushed.text
    memory_id = write(client, agent, "The monthly report goes to the finance channel.")
    memories_before = _memories(engine, tenant)

    bundle = recall(client, agent, query="Generate the monthly report for June")
    assert bundle["intent"] == "OPERATE" and bundle["plan"]["skill_token_budget"] == DEFAULT_SKILL_BUDGET
    assert "SKILLS" in [source["type"] for source in bundle["plan"]["sources"]]
    skills = {skill["name"]: skill for skill in bundle["skills"]}
    assert "monthly-report" in skills, bundle["skills"]
    report = skills["monthly-report"]
    fields = {f["name"]: f for f in report["fields"]}
    assert fields["constraints"]["value"] == ["Write the summary in Chinese."]
    assert (fields["constraints"]["source"]["space"], fields["constraints"]["source"]["agent_id"]) == ("AGENT",
                                                                                                     "reporter")
    assert fields["description"]["source"]["space"] == "SYSTEM"
    assert (fields["strategy"]["value"], fields["strategy"]["source"]["space"]) == ("Start from last month's report.",
                                                                                    "TENANT")
    assert [layer["space"] for layer in report["layers"]] == ["SYSTEM", "TENANT", "AGENT"]
    assert sum(_skill_tokens(s) for s in bundle["skills"]) <= DEFAULT_SKILL_BUDGET
    assert bundle["version_vector"]["skill:monthly-report:AGENT:reporter"] == 1
    # The memory is recalled in its own budget beside the skills; no skill is a memory or knowledge.
    assert [item["memory_id"] for item in bundle["items"]] == [memory_id]
    assert all("skill" not in item["memory_id"] for item in bundle["items"] + bundle["knowledge"])
    assert _memories(engine, tenant) == memories_before

    question = recall(client, agent, query="Generate the monthly report for June", intent="ANSWER")
    assert question["skills"] == [] and question["skills_truncated_by_budget"] is False
    assert not any(key.startswith("skill:") for key in question["version_vector"])
    assert [item["memory_id"] for item in question["items"]] == [memory_id]

    zh = recall(client, agent, query="帮我生成六月的月报")
    assert zh["intent"] == "OPERATE" and [s["name"] for s in zh["skills"]][:1] == ["monthly-report"]

    rendered = client.post("/recall/render", json={"query": "Generate the monthly report for June"},
                           headers=auth(agent)).json()["text"]
    assert '<skill name="monthly-report" succeeded="0" failed="0" partial="0">' in rendered  # no run reported yet
    assert '<constraints space="AGENT" version="1">Write the summary in Chinese.</constraints>' in rendered


def test_a_small_skills_quota_keeps_the_fields_that_fit_and_says_what_it_left_out(
    client: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    bundle = recall(client, key, query="draft the incident digest for week 23", skill_token_budget=120)
    assert bundle["skills_truncated_by_budget"] is True
    digest = next(s for s in bundle["skills"] if s["name"] == "incident-digest")
    kept = [f["name"] for f in digest["fields"]]
    assert kept[0] == "description" and digest["omitted"] and not set(kept) & set(digest["omitted"])
    assert sum(_skill_tokens(s) for s in bundle["skills"]) <= 120
    unrelated = recall(client, key, query="run the quarterly budget forecast")
    assert unrelated["intent"] == "OPERATE" and unrelated["skills"] == []
