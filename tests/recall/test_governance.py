"""Preferences and request overrides, the conflict cases of seed 003 §11, plans, render, audit, min_revision."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.schemas.recall import bundle_body
from memory.db import tenant_session
from memory.identity.auth import PrincipalContext
from memory.models import Memory
from memory.recall.bundle import build_bundle
from memory.recall.bundle_types import TaskState
from memory.recall.plan import Intent, SourceSpec, SourceType, classify_intent, make_plan
from memory.recall.preferences import effective_preferences
from memory.recall.request import RecallRequest
from tests.conftest import MakeKey, auth
from tests.recall.conftest import ids, recall, write


def _pref(key: str, value: str, *, project: str | None = None, n: int = 0) -> Memory:
    return Memory(memory_id=uuid.UUID(int=n), version=1, key=key, content=value, project_id=project, space="USER",
                  status="ACTIVE", source_level="E2", source_type="EXPLICIT_USER_STATEMENT")


FMT, LANG = "response.output_format", "response.language"
OVERRIDE_CASES = [
    # (stored, request constraints, expected effective subset, expected winner source of FMT)
    ([], {}, {FMT: "markdown"}, "PRODUCT_DEFAULT"),
    ([_pref(FMT, "markdown")], {FMT: "plain_text"}, {FMT: "plain_text"}, "CURRENT_REQUEST"),
    ([_pref(FMT, "html")], {}, {FMT: "html"}, "GLOBAL"),
    ([_pref(FMT, "html"), _pref(FMT, "docx", project="p1", n=1)], {}, {FMT: "docx"}, "PROJECT"),
    ([_pref(FMT, "html"), _pref(FMT, "docx", project="p1", n=1)], {FMT: "plain_text"},
     {FMT: "plain_text"}, "CURRENT_REQUEST"),
    ([_pref(LANG, "zh-CN"), _pref(LANG, "en", project="p1", n=1)], {FMT: "plain_text"},
     {LANG: "en", FMT: "plain_text"}, "CURRENT_REQUEST"),
    ([_pref(LANG, "zh-CN")], {LANG: "en"}, {LANG: "en", FMT: "markdown"}, "PRODUCT_DEFAULT"),
]


@pytest.mark.parametrize(("stored", "constraints", "expected", "fmt_source"), OVERRIDE_CASES)
def test_request_overrides_follow_the_scope_order(
    stored: list[Memory], constraints: dict[str, str], expected: dict[str, str], fmt_source: str
) -> None:
    prefs = effective_preferences(stored, constraints)
    assert {k: prefs.effective[k] for k in expected} == expected
    assert prefs.sources[FMT].source == fmt_source
    assert all(d["persistent_change"] is False for d in prefs.decisions)


def test_markdown_profile_vs_plain_text_request_changes_nothing_stored(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    pref = write(client, key, "markdown", category="PREFERENCE", key=FMT)
    bundle = recall(client, key, query="写一份周报", request_constraints={FMT: "plain_text"})
    assert bundle["effective_preferences"][FMT] == "plain_text"
    [decision] = [d for d in bundle["conflict_decisions"] if d["key"] == FMT]
    assert decision["winner"] == "CURRENT_REQUEST" and decision["suppressed"] == "GLOBAL"
    assert decision["persistent_change"] is False and decision["suppressed_ref"]["memory_id"] == pref
    stored = client.get(f"/memories/{pref}", headers=auth(key)).json()
    assert stored["version"] == 1 and stored["content"] == "markdown"
    plain = recall(client, key, query="写一份周报")
    assert plain["effective_preferences"][FMT] == "markdown" and plain["preference_sources"][FMT]["memory_id"] == pref


def test_an_inference_never_becomes_an_effective_preference(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    write(client, key, "html", category="PREFERENCE", key=FMT, source_level="E4")
    assert recall(client, key, query="周报格式")["effective_preferences"][FMT] == "markdown"


def test_moved_from_shanghai_to_hangzhou_the_newer_fact_wins(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    old = write(client, key, "用户住在上海 lives in Shanghai", key="home.city",
                validity={"observed_at": "2024-01-01T00:00:00Z"})
    new = write(client, key, "用户搬到杭州了 lives in Hangzhou", key="home.city",
                validity={"observed_at": "2025-06-01T00:00:00Z"})
    bundle = recall(client, key, query="用户住在哪里 lives in", limit=5)
    assert new in ids(bundle) and old not in ids(bundle)
    [decision] = [d for d in bundle["conflict_decisions"] if d["key"] == "home.city"]
    assert decision["reason"] == "NEWER_FACT" and decision["winner"]["memory_id"] == new
    assert decision["suppressed"]["memory_id"] == old


def test_a_conflict_no_rule_decides_is_returned_with_both_sources(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    a = write(client, key, "公司总部在北京 headquarters Beijing", key="company.hq")
    b = write(client, key, "公司总部在深圳 headquarters Shenzhen", key="company.hq")
    bundle = recall(client, key, query="公司总部 headquarters")
    assert ids(bundle) == []
    [conflict] = bundle["conflicts"]
    assert conflict["status"] == "UNRESOLVED" and {c["memory_id"] for c in conflict["candidates"]} == {a, b}
    assert any("company.hq" in w for w in bundle["warnings"])


def test_a_summary_older_than_the_live_task_state_is_stale(
    engine: Engine, make_key: MakeKey, client: TestClient
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    summary = write(client, key, "月报已经完成 the monthly report is finished",
                    source={"source_id": "sum-300", "source_type": "SUMMARY", "captured_at": "2026-06-01T09:00:00Z",
                            "evidence_refs": ["task:task-1001@12"]})
    fresh = write(client, key, "月报需要财务审批 the monthly report needs finance approval",
                  source={"source_id": "kb-1", "source_type": "EXPLICIT_USER_STATEMENT",
                          "captured_at": "2026-06-01T09:00:00Z", "evidence_refs": ["task:task-1001@18"]})
    principal = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), "k")
    task = TaskState(task_id="task-1001", status="WAITING_FOR_APPROVAL", current_step_id="publish_report",
                     state_version=18)
    request = RecallRequest(query="monthly report 月报", plan=make_plan(Intent.RESUME_TASK, task_id="task-1001"),
                            task_state=task)
    with tenant_session(engine, tenant) as session:
        bundle: dict[str, Any] = bundle_body(build_bundle(session, principal, request, datetime.now(UTC)).bundle)
    assert ids(bundle) == [fresh]
    [stale] = [d for d in bundle["conflict_decisions"] if d["reason"] == "STALE_AGAINST_TASK_STATE"]
    assert stale["suppressed"]["memory_id"] == summary and stale["winner"] == "TASK_STATE"
    assert any("stale" in w for w in bundle["warnings"]) and any("approval" in w for w in bundle["warnings"])
    assert bundle["version_vector"]["task_state_version"] == 18


def test_plans_per_intent() -> None:
    assert classify_intent("你好！", None) is Intent.CHITCHAT
    assert classify_intent("thanks", None) is Intent.CHITCHAT
    assert classify_intent("what did I say about the budget?", None) is Intent.ANSWER
    assert classify_intent("continue", "task-1") is Intent.RESUME_TASK
    resume = make_plan(Intent.RESUME_TASK, task_id="t")
    assert resume.reads(SourceType.TASK_STATE) is not None and resume.reads(SourceType.TASK_STATE).required  # type: ignore[union-attr]
    assert make_plan(Intent.CHITCHAT).reads(SourceType.MEMORY) is None
    # Without a task id a resume lists the caller's resumable tasks to choose from (seed 003 §14.2).
    assert make_plan(Intent.RESUME_TASK).reads(SourceType.TASK_STATE) == SourceSpec(SourceType.TASK_STATE, 10, True)


def test_chitchat_reads_no_memory_and_an_unknown_task_is_a_404(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    write(client, key, "你好 hello there memory")
    chat = recall(client, key, query="hello")
    assert chat["intent"] == "CHITCHAT" and chat["items"] == [] and chat["candidates_considered"] == 0
    missing = client.post("/memory-query", json={"query": "继续", "task_id": "no-such-task"}, headers=auth(key))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_render_carries_provenance_and_the_audit_event_has_no_content(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    auditor = make_key(tenant=tenant, user="sre", roles=("auditor",))
    memory_id = write(client, key, "密码提示是 <蓝色> & 海洋")
    rendered = client.post(
        "/recall/render", json={"query": "密码提示", "trace_id": "trace-9001"}, headers=auth(key)
    ).json()
    text = rendered["text"]
    assert f'id="{memory_id}"' in text and 'source="conv-1"' in text and "score=" in text
    assert "&lt;蓝色&gt; &amp; 海洋" in text
    assert client.get("/recall/audit", headers=auth(key)).status_code == 403
    events = client.get("/recall/audit", params={"trace_id": "trace-9001"}, headers=auth(auditor)).json()["events"]
    [event] = events
    assert event["selected_refs"] == [f"{memory_id}@1"] and event["principal"]["user_id"] == "alice"
    assert "蓝色" not in str(event)
    other = make_key(roles=("auditor",))
    assert client.get("/recall/audit", params={"trace_id": "trace-9001"}, headers=auth(other)).json()["events"] == []


def test_min_revision_reads_your_writes_or_says_where_the_store_is(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    written = client.post("/memory-candidates", json={
        "category": "PROFILE", "space": "USER", "content": "喜欢喝乌龙茶",
        "source": {"source_id": "c", "source_type": "EXPLICIT_USER_STATEMENT", "captured_at": "2026-06-01T09:00:00Z"},
        "source_level": "E2"}, headers=auth(key)).json()
    bundle = recall(client, key, query="乌龙茶", min_revision=written["revision"])
    assert bundle["snapshot_revision"] >= written["revision"] and ids(bundle) == [written["memory_id"]]
    ahead = client.post("/memory-query", json={"query": "乌龙茶", "min_revision": 10**12}, headers=auth(key))
    assert ahead.status_code == 409
    assert ahead.json()["error"]["code"] == "revision_not_reached"
    assert ahead.json()["error"]["details"]["current_revision"] >= written["revision"]


def test_strict_parsing_of_the_recall_request(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    for body in ({"query": "x", "user_id": "bob"}, {"query": "x", "explain": None}, {"query": "x", "bogus": 1},
                 {"query": "x", "intent": "GUESS"}):
        response = client.post("/memory-query", json=body, headers=auth(key))
        assert response.status_code == 422, body
        assert response.json()["error"]["code"]
