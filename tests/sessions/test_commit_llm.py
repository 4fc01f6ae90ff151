"""session.commit end to end on the ``llm`` path: real API, real PostgreSQL, a real Temporal worker whose
extractor talks HTTP to the labelled LLM stand-in (tests/sessions/llm_standin.py), the one scripted part.

The exhaustion of the extract activity's retries (six attempts backing off from 1 s, over 30 s of waiting)
is not driven here to keep the file fast; a 401 (not retried) covers the ``extractor_unavailable`` ending
and a 429 then a 500 then an answer covers the retries."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.knowledge.publish import publish
from memory.llm import LlmConfig
from memory.models import Memory
from memory.sessions.extraction.llm import LlmExtractor
from tests.conftest import MakeKey, auth
from tests.observability.scrape import parse, value
from tests.sessions.conftest import commit, post, say
from tests.sessions.llm_standin import LlmStandIn, Reply, answer, completion, running_standin
from tests.workers import ThreadWorker

MODEL = "qwen2.5-7b-instruct"


@dataclass(frozen=True)
class LlmStack:
    api: TestClient
    standin: LlmStandIn


@pytest.fixture(scope="module")
def llm_stack(settings: Settings, engine: Engine) -> Iterator[LlmStack]:
    """An API and a worker on their own task queue, the worker extracting through the stand-in."""
    own = settings.model_copy(update={"task_queue": f"llm-commit-{uuid.uuid4().hex[:8]}"})
    with running_standin() as standin:
        extractor = LlmExtractor(LlmConfig(standin.base_url, MODEL, "sk-standin-key", timeout_seconds=5.0))
        worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine),
                              extractor=extractor).start()
        try:
            with TestClient(create_app(own)) as api:
                yield LlmStack(api, standin)
        finally:
            worker.stop()


@pytest.fixture
def stack(llm_stack: LlmStack) -> Iterator[LlmStack]:
    """The module's stack with an empty script and record; every scripted reply must be used by the test."""
    llm_stack.standin.replies.clear()
    llm_stack.standin.received.clear()
    yield llm_stack
    assert not llm_stack.standin.replies, f"scripted replies left unused: {list(llm_stack.standin.replies)}"


@dataclass(frozen=True)
class Owner:
    tenant: str
    key: str


@pytest.fixture
def owner(make_key: MakeKey) -> Owner:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    return Owner(tenant, make_key(tenant=tenant))


def _item(event_id: str, **overrides: Any) -> dict[str, Any]:
    """One candidate as the model writes it: by default the user's city, citing ``event_id``."""
    item: dict[str, Any] = {
        "category": "PROFILE",
        "abstract": "lives in Shanghai",
        "overview": "PROFILE profile.city = 上海\nsource: the user said so",
        "content": "我住在上海。",
        "key": "profile.city",
        "source_level": "E2",
        "evidence_event_ids": [event_id],
        "correction": False,
    }
    item.update(overrides)
    return item


def _memories(engine: Engine, tenant: str) -> list[Memory]:
    with tenant_session(engine, tenant) as session:
        rows = list(session.execute(select(Memory).order_by(Memory.stored_at)).scalars())
        session.expunge_all()
    return rows


def _shanghai(stack: LlmStack, owner: Owner, session_id: str) -> list[str]:
    return post(
        stack.api, owner.key, session_id,
        say("m1", "user", "我住在上海。"),
        say("m2", "user", "以后都用英文回答。"),
        say("m3", "assistant", "Got it, I will answer in English from now on."),
    )


def test_a_well_formed_answer_is_stored_with_the_cited_evidence_and_the_tokens_used(
    stack: LlmStack, owner: Owner, engine: Engine
) -> None:
    events = _shanghai(stack, owner, "s-good")
    language = _item(events[1], category="PREFERENCE", abstract="answers in English", content="以后都用英文回答。",
                     overview="PREFERENCE response.language = en", key="response.language")
    stack.standin.script(answer(_item(events[0]), language, prompt_tokens=812, completion_tokens=97))

    done = commit(stack.api, owner.key, "s-good", "c-good")

    assert done["status"] == "completed", done
    created = {m["key"]: m for m in done["memories"]["created"]}
    assert set(created) == {"profile.city", "response.language"}
    assert created["profile.city"]["evidence_refs"] == [f"event:{events[0]}"]
    assert created["response.language"]["evidence_refs"] == [f"event:{events[1]}"]
    assert {m["status"] for m in created.values()} == {"ACTIVE"}
    stats = done["stats"]
    assert (stats["extractor"], stats["model"]) == ("llm", MODEL)
    assert (stats["prompt_tokens"], stats["completion_tokens"]) == (812, 97)
    assert (stats["candidates"], stats["memories_extracted"], stats["rejected"]) == (2, 2, {})

    [request] = stack.standin.received
    transcript = json.loads(request.body["messages"][1]["content"])
    assert [(m["event_id"], m["role"]) for m in transcript] == list(zip(events, ("user", "user", "assistant"),
                                                                         strict=True))
    stored = {row.key: row for row in _memories(engine, owner.tenant)}
    assert set(stored) == {"profile.city", "response.language"}
    assert stored["profile.city"].evidence_refs == [f"event:{events[0]}"]
    assert stored["profile.city"].source_type == "SESSION_COMMIT"
    assert stored["response.language"].content == "en"  # a keyed preference stores its value


def test_a_model_claiming_e1_for_an_assistant_sentence_gets_an_e4_candidate(
    stack: LlmStack, owner: Owner, engine: Engine
) -> None:
    events = post(
        stack.api, owner.key, "s-guess",
        say("g1", "user", "帮我写一份周报。"),
        say("g2", "assistant", "好的。你似乎更喜欢简短的回答。"),
    )
    guess = _item(
        events[1], category="PREFERENCE", abstract="prefers brief answers", content="你似乎更喜欢简短的回答。",
        overview="PREFERENCE response.verbosity = brief", key="response.verbosity", source_level="E1",
    )
    stack.standin.script(answer(guess))

    done = commit(stack.api, owner.key, "s-guess", "c-guess")

    assert done["status"] == "completed", done
    [created] = done["memories"]["created"]
    assert (created["source_level"], created["status"]) == ("E4", "CANDIDATE")
    [row] = _memories(engine, owner.tenant)
    assert (row.source_level, row.status, row.evidence_refs) == ("E4", "CANDIDATE", [f"event:{events[1]}"])


def test_an_unknown_category_is_refused_by_name_and_the_good_candidate_alone_is_stored(
    stack: LlmStack, owner: Owner, engine: Engine
) -> None:
    events = _shanghai(stack, owner, "s-mixed")
    hobby = _item(events[1], category="HOBBY", abstract="likes English", content="以后都用英文回答。", key=None,
                  overview="HOBBY english")
    stack.standin.script(answer(hobby, _item(events[0])))

    done = commit(stack.api, owner.key, "s-mixed", "c-mixed")

    assert done["status"] == "completed_with_rejections", done
    [refused] = done["reasons"]
    assert refused["reason"] == "invalid_category" and "'HOBBY'" in refused["detail"], refused
    assert refused["evidence_event_ids"] == [events[1]]
    assert done["stats"]["rejected"] == {"invalid_category": 1}
    [created] = done["memories"]["created"]
    assert created["key"] == "profile.city" and done["memories"]["candidates"] == 1
    [row] = _memories(engine, owner.tenant)
    assert str(row.memory_id) == created["memory_id"] and row.category == "PROFILE"


def _rejections(api: TestClient) -> dict[str, float]:
    """``mnemo_session_commits_with_rejections`` by kind, from the API's real /metrics."""
    samples = parse(api.get("/metrics").text)
    return {kind: value(samples, "mnemo_session_commits_with_rejections", kind=kind)
            for kind in ("rule", "schema", "unavailable", "write")}


def test_a_rightful_refusal_and_a_schema_failure_are_counted_apart(
    stack: LlmStack, owner: Owner, make_key: MakeKey
) -> None:
    """A one-time constraint refused by the gates is the gates doing their job, not a schema failure."""
    before = _rejections(stack.api)
    events = _shanghai(stack, owner, "s-once")
    once = post(stack.api, owner.key, "s-once", say("m4", "user", "这次用英文回答。"))
    this_time = _item(once[0], category="PREFERENCE", abstract="English this time", content="这次用英文回答。",
                      overview="PREFERENCE response.language = en", key="response.language")
    stack.standin.script(answer(_item(events[0]), this_time))
    refused = commit(stack.api, owner.key, "s-once", "c-once")
    assert refused["status"] == "completed_with_rejections", refused
    assert [r["reason"] for r in refused["reasons"]] == ["temporary_constraint"]
    assert refused["stats"]["rejected_by_kind"] == {"rule": 1}
    after_rule = _rejections(stack.api)
    assert after_rule == {**before, "rule": before["rule"] + 1}

    other = Owner(owner.tenant, make_key(tenant=owner.tenant, user="bob"))
    events = _shanghai(stack, other, "s-broken")
    hobby = _item(events[1], category="HOBBY", abstract="likes English", content="以后都用英文回答。", key=None,
                  overview="HOBBY english")
    stack.standin.script(answer(hobby, _item(events[0])))
    broken = commit(stack.api, other.key, "s-broken", "c-broken")
    assert broken["stats"]["rejected_by_kind"] == {"schema": 1}
    assert _rejections(stack.api) == {**after_rule, "schema": after_rule["schema"] + 1}


def test_an_answer_that_is_not_json_fails_the_commit_naming_invalid_answer_and_stores_nothing(
    stack: LlmStack, owner: Owner, engine: Engine
) -> None:
    _shanghai(stack, owner, "s-prose")
    stack.standin.script(completion("Sure! The user lives in Shanghai and wants English answers."))

    done = commit(stack.api, owner.key, "s-prose", "c-prose")

    assert done["status"] == "failed_requires_action", done
    assert [r["reason"] for r in done["reasons"]] == ["invalid_answer"]
    assert "not the JSON asked for" in done["reasons"][0]["detail"]
    assert done["stats"]["rejected"] == {"invalid_answer": 1}
    assert done["memories"]["created"] == [] and done["memories"]["merged"] == []
    assert _memories(engine, owner.tenant) == []


def test_a_429_then_a_500_are_retried_and_the_commit_completes_from_the_third_answer(
    stack: LlmStack, owner: Owner, engine: Engine
) -> None:
    events = _shanghai(stack, owner, "s-retry")
    stack.standin.script(
        Reply(429, '{"error": {"message": "rate limited"}}'),
        Reply(500, '{"error": {"message": "upstream crashed"}}'),
        answer(_item(events[0]), prompt_tokens=300, completion_tokens=20),
    )

    done = commit(stack.api, owner.key, "s-retry", "c-retry")

    assert done["status"] == "completed", done
    assert len(stack.standin.received) == 3
    first, second, third = (request.body for request in stack.standin.received)
    assert first == second == third  # each attempt asks for the same stage
    assert (done["stats"]["prompt_tokens"], done["stats"]["completion_tokens"]) == (300, 20)
    [row] = _memories(engine, owner.tenant)
    assert row.key == "profile.city" and row.evidence_refs == [f"event:{events[0]}"]


def test_a_401_is_not_retried_and_fails_the_commit_with_a_reason_a_person_can_act_on(
    stack: LlmStack, owner: Owner, engine: Engine
) -> None:
    _shanghai(stack, owner, "s-401")
    stack.standin.script(Reply(401, '{"error": {"message": "invalid api key sk-standin-key"}}'))

    done = commit(stack.api, owner.key, "s-401", "c-401")

    assert done["status"] == "failed_requires_action", done
    [reason] = done["reasons"]
    assert reason["reason"] == "extractor_unavailable"
    assert "answered 401" in reason["detail"] and "check MNEMO_LLM_API_KEY" in reason["detail"], reason
    assert "sk-standin-key" not in reason["detail"]  # the endpoint's body (which may echo the key) is not quoted
    assert done["error"] == reason["detail"]
    assert len(stack.standin.received) == 1
    assert _memories(engine, owner.tenant) == []


@pytest.mark.parametrize("failure", [
    Reply(401, '{"error": {"message": "bad key"}}'), completion("I could not find anything to remember."),
], ids=["unreachable", "unusable_answer"])
def test_after_a_failed_commit_the_same_stage_is_committed_again_once_the_endpoint_answers(
    stack: LlmStack, owner: Owner, engine: Engine, failure: Reply
) -> None:
    events = _shanghai(stack, owner, "s-again")
    stack.standin.script(failure)
    failed = commit(stack.api, owner.key, "s-again", "c-first")
    assert failed["status"] == "failed_requires_action", failed
    stack.standin.script(answer(_item(events[0])))

    again = commit(stack.api, owner.key, "s-again", "c-second")

    assert again["status"] == "completed", again
    assert again["sequence_range"] == failed["sequence_range"] == {"from": 1, "to": 3}
    [row] = _memories(engine, owner.tenant)
    assert row.key == "profile.city" and row.evidence_refs == [f"event:{events[0]}"]
    assert stack.standin.received[-1].body == stack.standin.received[0].body  # the same stage, asked again


def test_a_tool_experience_seen_again_accumulates_its_count_in_a_new_version(
    stack: LlmStack, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant, agent="report-agent")
    lesson = "sales_query needs the month as YYYY-MM; '2026年6月' fails with a 400."
    seen: list[str] = []
    for n in (1, 2):
        (event,) = post(stack.api, key, f"s-tool-{n}", say(f"t{n}", "user", f"查一下六月的销售额。{lesson}"))
        seen.append(event)
        stack.standin.script(answer(_item(event, category="TOOL_EXPERIENCE", abstract="sales_query month format",
                                          overview="TOOL_EXPERIENCE sales_query", content=lesson,
                                          key="tool.sales_query.month_format")))
        done = commit(stack.api, key, f"s-tool-{n}", f"c-tool-{n}")
        assert done["status"] == "completed", done
    (merged,) = done["memories"]["merged"]
    assert merged["reason"] == "accumulate" and merged["supersedes_version"] == 1
    rows = [row for row in _memories(engine, tenant) if row.key == "tool.sales_query.month_format"]
    head = max(rows, key=lambda row: row.version)
    assert (head.version, head.occurrences, head.space, head.owner_id) == (2, 2, "AGENT", "report-agent")
    assert head.evidence_refs == [f"event:{seen[0]}", f"event:{seen[1]}"]


def test_an_inferred_tool_experience_seen_again_is_skipped_not_a_failed_commit(
    stack: LlmStack, make_key: MakeKey
) -> None:
    key = make_key(agent="report-agent")
    lesson = "The export tool times out on files over 50 MB."
    for n in (1, 2):
        (event,) = post(stack.api, key, f"s-inf-{n}", say(f"i{n}", "tool", lesson, tool_call_id=None)
                        if False else say(f"i{n}", "assistant", lesson))
        stack.standin.script(answer(_item(event, category="TOOL_EXPERIENCE", abstract="export timeout",
                                          overview="TOOL_EXPERIENCE export", content=lesson, key=None)))
        done = commit(stack.api, key, f"s-inf-{n}", f"c-inf-{n}")
        assert done["status"] == "completed", done
    assert [m["reason"] for m in done["memories"]["skipped"]] == ["same_content"]


def test_a_case_the_model_concludes_is_a_p3_candidate_and_never_knowledge(
    stack: LlmStack, make_key: MakeKey, engine: Engine
) -> None:
    """Issue 27: a session commit's CASE is proposed for review as P3 (a model's conclusion), once per commit and
    memory, with the phone number in it redacted; nothing is published."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant, agent="ops-agent")
    summary = "重启网关无效；补全中间证书后 TLS 握手恢复。值班电话 13800138000。"
    for n in (1, 2):
        (event,) = post(stack.api, key, f"s-case-{n}", say(f"k{n}", "assistant", summary))
        stack.standin.script(answer(_item(event, category="CASE", abstract="TLS fixed by the certificate chain",
                                          overview="CASE tls", content=summary, key="case.gateway_tls",
                                          source_level="E4")))
        done = commit(stack.api, key, f"s-case-{n}", f"c-case-{n}")
        assert done["status"] == "completed", done
        assert done["stats"]["knowledge_candidates"] == (1 if n == 1 else 0)  # the second is the same memory
    with tenant_session(engine, tenant) as session:
        candidates = list(session.execute(select(KnowledgeCandidate).order_by(KnowledgeCandidate.created_at))
                          .scalars())
        published = session.execute(select(KnowledgeItem)).scalars().all()
    assert candidates and {(c.authority, c.origin, c.status) for c in candidates} == {
        ("P3", "SESSION_COMMIT", "PENDING_REVIEW")}
    assert candidates[0].origin_ref == "commit:c-case-1" and "13800138000" not in candidates[0].claim
    assert candidates[0].redactions == [{"kind": "phone", "path": "claim"}]
    assert published == []


def test_on_the_llm_path_a_skill_report_is_stored_and_a_model_cannot_forge_one(
    stack: LlmStack, make_key: MakeKey, engine: Engine
) -> None:
    """Issue 27: the report yields its SKILL_EXECUTION whichever extractor runs; the model's own is refused."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant, agent="report-agent")
    report = {"skill": "monthly-report", "version": "1.0.0", "outcome": "failed", "note": "the approval timed out"}
    said, reported = post(stack.api, key, "s-skill", say("k1", "assistant", "Publishing June's report now."),
                          say("k2", "assistant", "The report could not be published.", skill_execution=report))
    stack.standin.script(answer(_item(said, category="SKILL_EXECUTION", abstract="published", key=None,
                                      overview="SKILL_EXECUTION monthly-report", content="Published June's report.")))

    done = commit(stack.api, key, "s-skill", "c-skill")

    assert done["status"] == "completed_with_rejections", done
    assert [r["reason"] for r in done["reasons"]] == ["invalid_category"]
    [row] = _memories(engine, tenant)
    assert (row.category, row.space, row.source_level) == ("SKILL_EXECUTION", "AGENT", "E2")
    assert row.content == "skill monthly-report 1.0.0 failed: the approval timed out"
    assert row.evidence_refs == [f"event:{reported}"]


def test_the_loop_a_model_could_close_stays_open(stack: LlmStack, make_key: MakeKey, engine: Engine) -> None:
    """Issue 27's loop: a model's summary committed from a session, recalled, committed again never becomes knowledge
    and never reaches the bundle's knowledge section — not even once a reviewer approved its P3 candidate."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant, agent="ops-agent", roles=("memory_writer",))
    summary = "网关 TLS 故障的根因是缺少中间证书；补全证书链即可恢复。"
    query = {"query": "网关 TLS 故障 根因 中间证书", "intent": "ANSWER"}

    def commit_summary(n: int, text: str) -> None:
        (event,) = post(stack.api, key, f"s-loop-{n}", say(f"l{n}", "assistant", text))
        stack.standin.script(answer(_item(event, category="CASE", abstract="gateway TLS root cause",
                                          overview="CASE tls", content=summary, key="case.gateway_tls",
                                          source_level="E4")))
        assert commit(stack.api, key, f"s-loop-{n}", f"c-loop-{n}")["status"] == "completed"

    def knowledge_section() -> list[dict[str, Any]]:
        bundle = stack.api.post("/memory-query", json=query, headers=auth(key))
        assert bundle.status_code == 200, bundle.text
        return list(bundle.json()["knowledge"])

    commit_summary(1, summary)
    with tenant_session(engine, tenant) as session:  # a reviewer approves the P3 candidate: it is published as P3
        [candidate] = session.execute(select(KnowledgeCandidate)).scalars().all()
        assert (candidate.authority, candidate.origin) == ("P3", "SESSION_COMMIT")
        publish(session, candidate, "rita", datetime.now(UTC), None)
    assert knowledge_section() == []
    rendered = stack.api.post("/recall/render", json=query, headers=auth(key))
    commit_summary(2, f"根据记忆：{summary}\n{rendered.json().get('text', '')}")  # the recalled text, committed again
    assert knowledge_section() == []
    with tenant_session(engine, tenant) as session:
        items = session.execute(select(KnowledgeItem.authority, KnowledgeItem.status)).all()
        opened = session.execute(select(KnowledgeCandidate.authority)).scalars().all()
    assert [tuple(i) for i in items] == [("P3", "ACTIVE")] and set(opened) == {"P3"}
