"""The bundle's stages on their own (no database): the relevance cut, staleness and de-dup, the budget, and the
assembled bundle's JSON body."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from api.schemas.recall import BundleOut, bundle_body
from memory.knowledge.recall import KnowledgeEntry, KnowledgeRecalled
from memory.models import Memory
from memory.recall.bundle import Recalled, assemble
from memory.recall.bundle_types import NotApplicable, TaskState
from memory.recall.plan import Intent, make_plan
from memory.recall.preferences import Preferences, effective_preferences
from memory.recall.render import render
from memory.recall.request import RecallRequest
from memory.recall.scoring import ScoreBreakdown, Scored
from memory.recall.selection import Packed, applicable, pack, settle

NOW = datetime(2026, 11, 29, tzinfo=UTC)
QUERY = RecallRequest(query="report", plan=make_plan(Intent.ANSWER), min_relevance=0.2)


def _scored(n: int, content: str, *, relevance: float = 0.5, total: float = 1.0, sources: str = "fulltext",
            space: str = "USER", key: str | None = None, source_id: str = "chat-1",
            evidence: tuple[str, ...] = ()) -> Scored:
    memory = Memory(
        memory_id=uuid.UUID(int=n), version=1, key=key, content=content, abstract=content[:10], space=space,
        category="EVENT", status="ACTIVE", source_id=source_id, source_type="EXPLICIT_USER_STATEMENT",
        evidence_refs=list(evidence), source_level="E2", revision=n, project_id=None, session_id=None,
        allowed_purposes=[], observed_at=None, effective_from=None,
    )
    breakdown = ScoreBreakdown(lexical=1.0, expansion=0.0, coverage=1.0, fulltext=0.1, trigram=0.0, semantic=0.0,
                               cosine=None, fused=total, recency=0.5, hotness=0.0, authority=0.5, confirmation=0.0,
                               relevance=relevance, total=total)
    return Scored(memory, frozenset(sources.split(",")), breakdown)


def test_the_relevance_cut_keeps_key_matches_and_says_why_the_rest_is_left_out() -> None:
    keyed = _scored(1, "home city", relevance=0.0, sources="key", key="home_city")
    weak = _scored(2, "weak words", relevance=0.1)
    vector_only = _scored(3, "near in meaning only", sources="vector", total=-0.4)
    constrained = _scored(4, "plain text please", key="response.output_format")
    good = _scored(5, "the report is due")
    request = RecallRequest(query="report", plan=make_plan(Intent.ANSWER), min_relevance=0.2,
                            request_constraints={"response.output_format": "markdown"})
    relevant, left_out = applicable([keyed, weak, vector_only, constrained, good], request, Preferences())
    assert relevant == [keyed, good]
    assert left_out == [NotApplicable(str(uuid.UUID(int=2)), 1, "below_relevance_floor"),
                        NotApplicable(str(uuid.UUID(int=3)), 1, "vector_only_below_average")]
    many = [_scored(n, f"weak {n}", relevance=0.0) for n in range(10, 40)]
    assert len(applicable(many, request, Preferences())[1]) == 20


def test_settling_drops_a_stale_summary_and_a_second_copy_from_the_same_source() -> None:
    stale = _scored(1, "the report is finished", evidence=("task:t-1@3",))
    first = _scored(2, "The report needs approval")
    copy = _scored(3, "the report  needs approval")
    other_source = _scored(4, "the report needs approval", source_id="chat-2")
    task = TaskState(task_id="t-1", status="RUNNING", current_step_id=None, state_version=5)
    settled = settle([stale, first, copy, other_source], task)
    assert settled.kept == [first, other_source]
    assert [d["reason"] for d in settled.decisions] == ["STALE_AGAINST_TASK_STATE", "DUPLICATE_OF_SOURCE"]
    assert settled.decisions[1]["suppressed"] == {"memory_id": str(uuid.UUID(int=3)), "version": 1}
    assert len(settled.warnings) == 1 and "stale" in settled.warnings[0]
    assert settle([stale], None).kept == [stale]  # without a live task nothing is stale


def test_packing_fills_the_inject_limit_within_the_token_budget() -> None:
    long = _scored(1, "word " * 400)
    tenant_memory = _scored(2, "the tenant's travel policy", space="TENANT")
    short = [_scored(n, f"short memory {n}") for n in range(3, 8)]
    packed = pack([long, tenant_memory, *short], make_plan(Intent.ANSWER, inject_limit=3, token_budget=100))
    # A TENANT-space memory is a memory: it is packed with the caller's, never as knowledge.
    assert packed.truncated and packed.selected == [tenant_memory, *short[:2]]
    assert pack(short, make_plan(Intent.ANSWER, inject_limit=3)) == Packed(short[:3], False)


def test_the_assembled_bundles_body_is_the_documented_json() -> None:
    item = _scored(1, "the report is due")
    prefs = effective_preferences([], {"response.output_format": "plain_text"})
    task = TaskState(task_id="t-1", status="WAITING_FOR_APPROVAL", current_step_id="publish", state_version=7)
    request = RecallRequest(query="report", plan=make_plan(Intent.RESUME_TASK, task_id="t-1"), task_state=task,
                            request_constraints={"response.output_format": "plain_text"}, trace_id="tr-1")
    policy = KnowledgeEntry(
        knowledge_id="kb-1", version=4, key="report.publish_policy", claim="报告发布前必须获得财务审批", authority="P0",
        scope={"type": "TENANT", "project_id": None}, validity={"valid_from": None, "valid_to": None},
        source_refs=("doc:finance-policy",), score=1.2, score_breakdown={"relevance": 1.0, "total": 1.2},
        matched_by=("key",))
    knowledge = KnowledgeRecalled((policy,), ("knowledge report.publish_policy v3 (kb-1) is superseded by v4",), 4)
    bundle = assemble(request, 42, prefs, Recalled(packed=Packed([item], False), considered=3, dropped=1), knowledge)
    body = bundle_body(bundle)
    assert list(body) == [name for name in BundleOut.model_fields if name != "explain"]
    assert BundleOut.model_validate(body).model_dump(exclude_unset=True) == body
    assert body["warnings"] == ["the task is waiting for approval: do not publish or act on its draft yet",
                                "knowledge report.publish_policy v3 (kb-1) is superseded by v4"]
    assert body["version_vector"] == {f"memory:{uuid.UUID(int=1)}": 1, "knowledge:kb-1": 4, "knowledge_version": 4,
                                      "task_state_version": 7}
    assert body["knowledge"][0]["claim"] == "报告发布前必须获得财务审批"  # type: ignore[index]
    assert "<knowledge title=\"正式知识 / knowledge\">" in render(bundle)
    assert body["preference_sources"] == {"response.output_format": {"source": "CURRENT_REQUEST"}}
    assert body["items"][0]["source_refs"] == ["chat-1"] and body["items"][0]["matched_by"] == ["fulltext"]  # type: ignore[index]
    assert body["conflict_decisions"][0]["reason"] == "CURRENT_REQUEST_OVERRIDE"  # type: ignore[index]
