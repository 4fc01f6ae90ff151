"""Skill execution reports (issue 27 item 5): an agent reports a skill run in its session, and ``session.commit``
turns it into a SKILL_EXECUTION memory of the agent, through the real API, PostgreSQL and a Temporal worker on
the rules extractor. The report is checked at POST against the caller's skills; the memory holds the outcome and
the layers' references, never the skill's text, and never lands in a user's memories."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from api.schemas.sessions import MessageIn
from memory.db import tenant_session
from memory.enums import Category, SourceLevel
from memory.models import Memory, MemoryEvent
from memory.sessions.extraction.base import Extraction, RejectionReason
from memory.sessions.extraction.gates import apply_gates
from memory.sessions.extraction.llm import parse_answer
from memory.sessions.extraction.rules import RulesExtractor
from memory.sessions.messages import MessageRole, Stage, StageMessage
from memory.skills.executions import Outcome, SkillExecution
from memory.skills.layers import LayerRef
from memory.skills.system import system_skills
from tests.conftest import MakeKey, auth
from tests.sessions.conftest import commit, post, say
from tests.skills.test_skills_api import push, skill_md

SYSTEM = system_skills()["monthly-report"]
OVERLAY_ROLE = "You are the tenant's report clerk; always cite the finance approval."


def report(skill: str = "monthly-report", version: str = SYSTEM.declared_version, outcome: str = "succeeded",
           note: str = "drafted June's report; waiting for approval") -> dict[str, Any]:
    return {"skill": skill, "version": version, "outcome": outcome, "note": note}


def ran(key: str, content: str = "I ran the monthly report skill.", **execution: str) -> dict[str, Any]:
    return say(key, "assistant", content, skill_execution=report(**execution))


def rows(engine: Engine, tenant: str) -> list[Memory]:
    with tenant_session(engine, tenant) as session:
        found = list(session.execute(select(Memory).order_by(Memory.stored_at, Memory.version)).scalars())
        session.expunge_all()
    return found


def executions(engine: Engine, tenant: str) -> list[Memory]:
    return [row for row in rows(engine, tenant) if row.category == Category.SKILL_EXECUTION.value]


@pytest.fixture()
def tenant(make_key: MakeKey, sessions_api: TestClient) -> str:
    """A tenant whose admin overlaid monthly-report with a TENANT layer (declared 1.1.0)."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=name, user="root", roles=("admin",))
    pushed = push(sessions_api, admin, {"SKILL.md": skill_md("monthly-report", "1.1.0", role=OVERLAY_ROLE)})
    assert pushed.status_code == 201, pushed.text
    return name


def test_a_report_commits_one_skill_execution_of_the_agent_with_its_evidence_and_layers(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine, tenant: str
) -> None:
    key = make_key(tenant=tenant, user="alice", agent="planner")
    (event,) = post(sessions_api, key, "s-run", ran("r1", version="1.1.0"))
    done = commit(sessions_api, key, "s-run", "c-run")

    assert done["status"] == "completed", done
    [entry] = done["memories"]["created"]
    assert (entry["category"], entry["source_level"], entry["evidence_refs"]) == (
        "SKILL_EXECUTION", "E2", [f"event:{event}"])
    [row] = rows(engine, tenant)
    assert (row.category, row.space, row.owner_id, row.status) == ("SKILL_EXECUTION", "AGENT", "planner", "ACTIVE")
    assert row.content == "skill monthly-report 1.1.0 succeeded: drafted June's report; waiting for approval"
    assert row.evidence_refs == [f"event:{event}"] and row.occurrences == 1
    with tenant_session(engine, tenant) as session:
        stored = session.execute(select(MemoryEvent).where(MemoryEvent.event_id == uuid.UUID(event))).scalar_one()
        layers = stored.payload["skill_execution"]["layers"]
    assert [(layer["space"], layer["version"], layer["declared_version"]) for layer in layers] == [
        ("SYSTEM", None, "1.0.0"), ("TENANT", 1, "1.1.0")]
    assert layers[0]["tree_sha256"] == SYSTEM.tree_sha256
    assert row.overview is not None and all(layer["tree_sha256"] in row.overview for layer in layers)
    assert row.key is not None and row.key.startswith("skill.monthly-report.succeeded.")


def test_the_same_report_again_counts_two_occurrences_in_a_new_version(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine, tenant: str
) -> None:
    key = make_key(tenant=tenant, user="alice", agent="planner")
    first = post(sessions_api, key, "s-again-1", ran("a1"))
    assert commit(sessions_api, key, "s-again-1", "c-1")["status"] == "completed"
    second = post(sessions_api, key, "s-again-2", ran("a2"))
    done = commit(sessions_api, key, "s-again-2", "c-2")

    [merged] = done["memories"]["merged"]
    assert (merged["reason"], merged["version"], merged["supersedes_version"]) == ("accumulate", 2, 1)
    head = max(executions(engine, tenant), key=lambda row: row.version)
    assert (head.version, head.occurrences) == (2, 2)
    assert head.evidence_refs == [f"event:{first[0]}", f"event:{second[0]}"]


def test_a_failed_run_is_kept_as_failed_beside_the_successes(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine, tenant: str
) -> None:
    key = make_key(tenant=tenant, user="alice", agent="planner")
    post(sessions_api, key, "s-ok", ran("o1"))
    assert commit(sessions_api, key, "s-ok", "c-ok")["status"] == "completed"
    post(sessions_api, key, "s-ko", ran("k1", outcome="failed", note="drafted June's report; waiting for approval"))
    done = commit(sessions_api, key, "s-ko", "c-ko")

    assert [entry["reason"] for entry in done["memories"]["created"]] == ["new"], done
    by_outcome = {row.key.split(".")[2]: row for row in executions(engine, tenant) if row.key}
    assert set(by_outcome) == {"succeeded", "failed"}
    assert by_outcome["failed"].content.startswith("skill monthly-report 1.0.0 failed:")
    assert by_outcome["failed"].occurrences == by_outcome["succeeded"].occurrences == 1


def _outcomes(client: TestClient, key: str) -> dict[str, int]:
    answer = client.post("/memory-query", json={"query": "Generate the monthly report for June"}, headers=auth(key))
    assert answer.status_code == 200, answer.text
    bundle = answer.json()
    assert bundle["intent"] == "OPERATE", bundle
    [skill] = [s for s in bundle["skills"] if s["name"] == "monthly-report"]
    return dict(skill["outcomes"])


def test_an_operate_recall_shows_the_agents_runs_of_the_skill_as_it_resolves_now(
    sessions_api: TestClient, make_key: MakeKey, tenant: str
) -> None:
    key = make_key(tenant=tenant, user="alice", agent="planner")
    for n, outcome in enumerate(("succeeded", "succeeded", "failed")):
        post(sessions_api, key, f"s-recall-{n}", ran(f"q{n}", version="1.1.0", outcome=outcome))
        assert commit(sessions_api, key, f"s-recall-{n}", f"c-{n}")["status"] == "completed"

    assert _outcomes(sessions_api, key) == {"succeeded": 2, "failed": 1, "partial": 0}
    rendered = sessions_api.post("/recall/render", json={"query": "Generate the monthly report for June"},
                                 headers=auth(key)).json()["text"]
    assert '<skill name="monthly-report" succeeded="2" failed="1" partial="0">' in rendered
    other_agent = make_key(tenant=tenant, user="alice", agent="auditor-bot")
    assert _outcomes(sessions_api, other_agent) == {"succeeded": 0, "failed": 0, "partial": 0}
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    newer = push(sessions_api, admin, {"SKILL.md": skill_md("monthly-report", "1.2.0", role="A stricter clerk.")})
    assert newer.status_code == 201, newer.text
    assert _outcomes(sessions_api, key) == {"succeeded": 0, "failed": 0, "partial": 0}  # runs of other trees


@pytest.mark.parametrize(("message", "code", "field"), [
    (ran("u1", skill="no-such-skill"), "unknown_skill", "messages[1].skill_execution.skill"),
    (ran("u2", version="9.9.9"), "skill_version_mismatch", "messages[1].skill_execution.version"),
    (say("u3", "user", "I ran it.", skill_execution=report()), "skill_execution_role",
     "messages[1].skill_execution"),
], ids=["unknown_skill", "version_no_layer_declares", "user_message"])
def test_a_report_that_cannot_be_verified_is_a_422_and_nothing_of_the_batch_is_stored(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine, tenant: str, message: dict[str, Any], code: str,
    field: str,
) -> None:
    key = make_key(tenant=tenant, user="alice", agent="planner")
    sessions_api.post("/sessions", json={"session_id": "s-bad"}, headers=auth(key))
    batch = [say("u0", "user", "Run the monthly report."), message]
    answer = sessions_api.post("/sessions/s-bad/messages", json={"messages": batch}, headers=auth(key))

    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["details"]["field"]) == (code, field), error
    state = sessions_api.get("/sessions/s-bad", headers=auth(key)).json()
    assert state["messages"] == 0, state


@pytest.mark.parametrize("execution", [
    {"skill": "monthly-report", "version": "1.0.0", "outcome": "done", "note": "x"},
    {"skill": "monthly-report", "version": "1.0.0", "outcome": "failed", "note": "  "},
    {"skill": "Monthly Report", "version": "1.0.0", "outcome": "failed", "note": "x"},
    {"skill": "monthly-report", "version": "1.0.0", "outcome": "failed"},
    {"skill": "monthly-report", "version": "1.0.0", "outcome": "failed", "note": "x", "layers": []},
], ids=["outcome", "blank_note", "name", "note_missing", "layers_from_the_client"])
def test_a_malformed_report_is_refused_by_the_schema(
    sessions_api: TestClient, make_key: MakeKey, execution: dict[str, Any]
) -> None:
    key = make_key(agent="planner")
    sessions_api.post("/sessions", json={"session_id": "s-shape"}, headers=auth(key))
    message = say("x1", "assistant", "ran it", skill_execution=execution)
    answer = sessions_api.post("/sessions/s-shape/messages", json={"messages": [message]}, headers=auth(key))
    assert answer.status_code == 422, answer.text


def test_a_report_posted_again_is_a_replay_and_another_report_under_its_key_a_409(
    sessions_api: TestClient, make_key: MakeKey, tenant: str
) -> None:
    key = make_key(tenant=tenant, user="alice", agent="planner")
    sessions_api.post("/sessions", json={"session_id": "s-replay"}, headers=auth(key))
    answers = [sessions_api.post("/sessions/s-replay/messages", json={"messages": [message]}, headers=auth(key))
               for message in (ran("p1"), ran("p1"), ran("p1", outcome="failed"))]

    assert [a.status_code for a in answers] == [201, 200, 409], [a.text for a in answers]
    assert answers[1].json()["events"][0] == {**answers[0].json()["events"][0], "replayed": True}


def test_a_message_without_a_report_keeps_the_digest_it_had_before_reports_existed() -> None:
    """A replay of a message stored by an older mnemo must still match its stored request digest."""
    plain = MessageIn.model_validate(say("d0", "user", "hello"))
    assert "skill_execution" not in plain.digest_body()
    assert MessageIn.model_validate(ran("d1")).digest_body()["skill_execution"]["outcome"] == "succeeded"


def test_a_key_bound_to_no_agent_cannot_report(sessions_api: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    sessions_api.post("/sessions", json={"session_id": "s-noagent"}, headers=auth(key))
    answer = sessions_api.post("/sessions/s-noagent/messages", json={"messages": [ran("n1")]}, headers=auth(key))
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "agent_required"), answer.text


def test_another_tenants_tenant_skill_cannot_be_reported(
    sessions_api: TestClient, make_key: MakeKey, tenant: str
) -> None:
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    own = push(sessions_api, admin, {"SKILL.md": skill_md("digest", description="Digest things.", role="An editor.")})
    assert own.status_code == 201, own.text
    mine = make_key(tenant=tenant, user="alice", agent="planner")
    assert post(sessions_api, mine, "s-own", ran("d1", skill="digest", version="1.0.0"))
    stranger = make_key(user="alice", agent="planner")  # another tenant, the same names
    sessions_api.post("/sessions", json={"session_id": "s-foreign"}, headers=auth(stranger))
    answer = sessions_api.post("/sessions/s-foreign/messages", headers=auth(stranger),
                               json={"messages": [ran("d2", skill="digest", version="1.0.0")]})
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "unknown_skill"), answer.text


def test_no_execution_reaches_user_space_and_no_skill_text_reaches_any_memory(
    sessions_api: TestClient, make_key: MakeKey, engine: Engine, tenant: str
) -> None:
    key = make_key(tenant=tenant, user="alice", agent="planner")
    post(sessions_api, key, "s-text", say("t0", "user", "我住在上海。"),
         ran("t1", outcome="partial", note="the EUR figures were missing"))
    done = commit(sessions_api, key, "s-text", "c-text")

    assert done["status"] == "completed", done
    stored = rows(engine, tenant)
    assert sorted((row.category, row.space) for row in stored) == [("PROFILE", "USER"), ("SKILL_EXECUTION", "AGENT")]
    texts = [part for field, value in SYSTEM.fields.items() if field != "description"
             for part in ([value] if isinstance(value, str) else list(value))] + [OVERLAY_ROLE]
    for row in stored:
        written = " ".join(filter(None, (row.content, row.abstract, row.overview, row.key)))
        assert not [text for text in texts if text in written], row.category


def _stage(report: SkillExecution | None, role: MessageRole = MessageRole.ASSISTANT) -> Stage:
    at = datetime(2026, 7, 1, tzinfo=UTC)
    return Stage("s", (StageMessage("e1", 1, role, "I ran monthly-report; it failed.", at, skill_execution=report),))


VERIFIED = SkillExecution("monthly-report", "1.0.0", Outcome.FAILED, "the approval timed out",
                          (LayerRef("SYSTEM", None, None, "1.0.0", SYSTEM.tree_sha256),))


def test_the_gates_admit_a_report_at_e2_and_refuse_any_skill_execution_no_report_says() -> None:
    stage = _stage(VERIFIED)
    [reported] = RulesExtractor().extract(stage).candidates
    forged = [replace(reported, content="skill monthly-report 1.0.0 succeeded: fine"),
              replace(reported, source_level=SourceLevel.E1, key="skill.monthly-report.succeeded.x"),
              replace(reported, evidence_event_ids=("e-elsewhere",))]
    result = apply_gates(stage, Extraction((replace(reported, source_level=SourceLevel.E4), *forged)))

    assert [(c.category, c.source_level) for c in result.admitted] == [(Category.SKILL_EXECUTION, SourceLevel.E2)]
    assert [r.reason for r in result.rejections] == [RejectionReason.NOT_A_SKILL_REPORT] * 3
    unverified = _stage(replace(VERIFIED, layers=()))
    assert RulesExtractor().extract(unverified).candidates == ()
    assert [r.reason for r in apply_gates(unverified, Extraction((reported,))).rejections] == [
        RejectionReason.NOT_A_SKILL_REPORT]


def test_a_note_holding_a_secret_is_refused() -> None:
    stage = _stage(replace(VERIFIED, note="logged in with password: hunter2x9"))
    result = apply_gates(stage, RulesExtractor().extract(stage))
    assert result.admitted == () and [r.reason for r in result.rejections] == [RejectionReason.SECRET]


def test_a_model_cannot_propose_a_skill_execution() -> None:
    stage = _stage(None)
    item = {"category": "SKILL_EXECUTION", "abstract": "ran", "overview": "ran", "content": "ran it",
            "key": None, "source_level": "E2", "evidence_event_ids": ["e1"], "correction": False}
    candidates, rejections = parse_answer(json.dumps({"candidates": [item]}), stage)
    assert candidates == () and [r.reason for r in rejections] == [RejectionReason.INVALID_CATEGORY]
