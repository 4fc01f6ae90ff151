"""Recall's knowledge section holds published P0-P2 knowledge in scope and validity, nothing else (real PostgreSQL).

The property test draws random sets of items (authority, status, scope, validity; some left as candidates) and
compares the section and its warnings with an oracle written independently in Python.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import update
from sqlalchemy.engine import Engine

from memory.db import tenant_session
from memory.identity.auth import PrincipalContext
from memory.knowledge.models import KnowledgeItem
from memory.recall.bundle import build_bundle
from memory.recall.plan import Intent, SourceSpec, SourceType, make_plan
from memory.recall.request import RecallRequest
from memory.store.visibility import QueryFilters
from tests.conftest import MakeKey
from tests.knowledge.published import POLICY, open_candidate, published
from tests.recall.conftest import recall

NOW = datetime.now(UTC)
WINDOWS = {"none": None, "current": (-1, 1), "ended": (-2, -1), "future": (1, 2)}


@dataclasses.dataclass(frozen=True)
class Spec:
    authority: str
    status: str  # ACTIVE | SUPERSEDED | WITHDRAWN | CANDIDATE (never published)
    scope: str | None  # None: TENANT; else the PROJECT's id
    window: str


STATUSES = ["ACTIVE", "SUPERSEDED", "WITHDRAWN", "CANDIDATE"]
specs = st.lists(st.builds(
    Spec, st.sampled_from(["P0", "P1", "P2", "P3"]), st.sampled_from(STATUSES), st.sampled_from([None, "p1", "p2"]),
    st.sampled_from(list(WINDOWS))), min_size=1, max_size=8)


def _body(n: int, spec: Spec) -> dict[str, Any]:
    scope = {"type": "PROJECT", "project_id": spec.scope} if spec.scope else {"type": "TENANT"}
    body: dict[str, Any] = {"key": f"zebra.rule-{n}", "claim": f"zebra crossing rule number {n}",
                            "authority": spec.authority, "source_refs": [f"doc:rules#{n}"], "scope": scope}
    if (window := WINDOWS[spec.window]) is not None:
        body["validity"] = {"from": (NOW + timedelta(days=window[0])).isoformat(),
                            "to": (NOW + timedelta(days=window[1])).isoformat()}
    return body


def oracle_fact(spec: Spec) -> bool:
    """Independent of the SQL: what the seed says may be told as fact to a recall of project p1."""
    window = WINDOWS[spec.window]
    return (spec.status == "ACTIVE" and spec.authority in ("P0", "P1", "P2") and spec.scope in (None, "p1")
            and (window is None or window[0] < 0 < window[1]))


def oracle_warned(spec: Spec) -> bool:
    """Matched, in scope, of a recalled authority, and no longer a fact: superseded or past its validity."""
    window = WINDOWS[spec.window]
    lapsed = spec.status == "SUPERSEDED" or (spec.status == "ACTIVE" and window is not None and window[1] < 0)
    return lapsed and spec.authority in ("P0", "P1", "P2") and spec.scope in (None, "p1")


def _recall(engine: Engine, tenant: str, query: str, keys: tuple[str, ...], project: str | None) -> Any:
    plan = make_plan(Intent.ANSWER)
    wide = dataclasses.replace(plan, sources=tuple(
        SourceSpec(SourceType.KNOWLEDGE, 50) if s.type is SourceType.KNOWLEDGE else s for s in plan.sources),
        knowledge_token_budget=100_000)
    request = RecallRequest(query=query, plan=wide, keys=keys, filters=QueryFilters(project_id=project))
    principal = PrincipalContext(tenant, "bob", None, frozenset({"memory_writer"}), "test")
    with tenant_session(engine, tenant) as session:
        return build_bundle(session, principal, request, datetime.now(UTC)).bundle


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=specs)
def test_only_active_p0_to_p2_in_scope_and_validity_is_knowledge(engine: Engine, make_key: MakeKey,
                                                                  drawn: list[Spec]) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    keys: dict[str, Spec] = {}
    for n, spec in enumerate(drawn):
        body = _body(n, spec)
        keys[body["key"]] = spec
        if spec.status == "CANDIDATE":
            open_candidate(engine, tenant, body, NOW)
            continue
        item = published(engine, tenant, body, NOW)
        if spec.status != "ACTIVE":
            with tenant_session(engine, tenant) as session:
                session.execute(update(KnowledgeItem).where(KnowledgeItem.knowledge_id == item.knowledge_id)
                                .values(status=spec.status))
    # Every item matches by its key and its words: a score cannot let anything past the hard filters.
    bundle = _recall(engine, tenant, "zebra crossing rule", tuple(keys), "p1")
    assert {k.key for k in bundle.knowledge} == {key for key, spec in keys.items() if oracle_fact(spec)}
    warned = {key for key in keys if any(f"knowledge {key} v1 " in w for w in bundle.warnings)}
    assert warned == {key for key, spec in keys.items() if oracle_warned(spec)}
    assert bundle.version_vector["knowledge_version"] == sum(
        1 + (s.status == "WITHDRAWN") for s in keys.values()
        if s.status != "CANDIDATE" and s.authority != "P3" and s.scope in (None, "p1"))


def test_project_knowledge_only_in_its_project_and_a_superseded_version_is_a_warning(
    client: TestClient, engine: Engine, make_key: MakeKey,
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    v1 = published(engine, tenant, {**POLICY, "claim": "报告发布前须经部门主管审批"}, NOW)
    v2 = published(engine, tenant, POLICY, NOW)
    project = published(engine, tenant, {"key": "report.channel", "claim": "报告发布只走内网门户",
                                         "authority": "P1", "scope": {"type": "PROJECT", "project_id": "p1"},
                                         "source_refs": ["doc:p1/readme"]}, NOW)
    outside = recall(client, key, query="报告发布审批")
    assert [(k["knowledge_id"], k["version"]) for k in outside["knowledge"]] == [(str(v2.knowledge_id), 2)]
    assert outside["knowledge"][0]["authority"] == "P0" and "fulltext" in outside["knowledge"][0]["matched_by"]
    warning = next(w for w in outside["warnings"] if str(v1.knowledge_id) in w)
    assert "report.publish_policy v1" in warning and "superseded by v2" in warning
    inside = recall(client, key, query="报告发布审批", project_id="p1")
    assert {k["knowledge_id"] for k in inside["knowledge"]} == {str(v2.knowledge_id), str(project.knowledge_id)}
    assert inside["version_vector"]["knowledge_version"] == outside["version_vector"]["knowledge_version"] + 1
    assert inside["version_vector"][f"knowledge:{project.knowledge_id}"] == 1
    chat = recall(client, key, query="谢谢")
    assert chat["knowledge"] == [] and "knowledge_version" not in chat["version_vector"]


def test_knowledge_past_its_validity_is_a_warning_and_not_yet_valid_is_silent(
    client: TestClient, engine: Engine, make_key: MakeKey,
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    ended = published(engine, tenant, {**POLICY, "validity": {"to": (NOW - timedelta(hours=1)).isoformat()}}, NOW)
    later = published(engine, tenant, {"key": "report.deadline", "claim": "报告发布截止每月五日",
                                       "authority": "P1", "source_refs": ["doc:calendar"],
                                       "validity": {"from": (NOW + timedelta(days=1)).isoformat()}}, NOW)
    bundle = recall(client, key, query="报告发布")
    assert bundle["knowledge"] == []
    assert any(str(ended.knowledge_id) in w and "expired at" in w for w in bundle["warnings"])
    assert not any(str(later.knowledge_id) in w for w in bundle["warnings"])
