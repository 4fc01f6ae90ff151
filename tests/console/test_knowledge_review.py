"""The knowledge reviewer's pages in a real headless Chromium against the real API, worker, Temporal and
PostgreSQL: the inbox, a candidate with its conflict side by side, and the decision forms."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page

from tests.conftest import MakeKey, auth
from tests.console.conftest import csrf_of, sign_in


@pytest.fixture()
def api(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


def _propose(api: httpx.Client, key: str, claim: str, **extra: object) -> str:
    body = {"key": "report.publish_policy", "claim": claim, "authority": "P0", "scope": {"type": "TENANT"},
            "source_refs": ["doc:finance-handbook#4"], **extra}
    created = api.post("/knowledge-candidates", json=body, headers=auth(key))
    assert created.status_code == 201, created.text
    return str(created.json()["candidate_id"])


def _approve(api: httpx.Client, key: str, candidate_id: str) -> None:
    shown = api.get(f"/knowledge-candidates/{candidate_id}", headers=auth(key)).json()
    decided = api.post(f"/knowledge-candidates/{candidate_id}/reviews", headers=auth(key), json={
        "decision": "approve", "content_sha256": shown["content_sha256"], "state_version": shown["state_version"]})
    assert decided.status_code == 200, decided.text


def test_a_reviewer_sees_the_conflict_beside_the_claim_and_approves_after_a_stale_refusal(
    page: Page, base_url: str, api: httpx.Client, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    author = make_key(tenant=tenant, user="alice", roles=("memory_writer",))
    reviewer = make_key(tenant=tenant, user="bob", roles=("knowledge_reviewer",))
    other = make_key(tenant=tenant, user="carol", roles=("knowledge_reviewer",))
    candidate_id = _propose(api, author, "报告发布前必须获得财务审批", evidence=[{"quote": "联系 13800138000"}])
    sign_in(page, base_url, reviewer, "/console/knowledge")
    assert page.locator(f"a[href='/console/knowledge/{candidate_id}']").count() == 1
    page.click(f"a[href='/console/knowledge/{candidate_id}']")
    assert page.inner_text("#candidate-claim") == "报告发布前必须获得财务审批"
    assert "phone at evidence/0/quote" in page.inner_text("#redactions")
    assert "13800138000" not in page.content()
    assert page.locator("#no-conflicts").count() == 1

    _approve(api, other, _propose(api, author, "报告无需审批即可发布"))  # published while the page is open
    page.click("#approve")
    assert page.inner_text("#error-code") == "knowledge_conflicts_changed"
    page.goto(f"{base_url}/console/knowledge/{candidate_id}")
    assert page.inner_text(".conflict-claim") == "报告无需审批即可发布"
    page.click("#approve")
    assert "done=approved" in page.url
    assert page.inner_text("#status") == "APPROVED"
    versions = api.get("/knowledge", params={"status": "SUPERSEDED"}, headers=auth(author)).json()["items"]
    assert [v["claim"] for v in versions] == ["报告无需审批即可发布"]


def test_the_author_gets_no_forms_and_a_forged_post_is_refused(
    page: Page, base_url: str, api: httpx.Client, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    author = make_key(tenant=tenant, user="alice", roles=("knowledge_reviewer",))
    candidate_id = _propose(api, author, "Reports go out on the 5th working day")
    shown = api.get(f"/knowledge-candidates/{candidate_id}", headers=auth(author)).json()
    sign_in(page, base_url, author, f"/console/knowledge/{candidate_id}")
    assert "you proposed this candidate" in page.inner_text("#why-not-review")
    assert page.locator("#approve").count() == 0
    forged = page.request.post(f"{base_url}/console/knowledge/{candidate_id}/review", form={
        "csrf_token": csrf_of(page), "decision": "approve", "content_sha256": shown["content_sha256"],
        "state_version": str(shown["state_version"])}, max_redirects=0)
    assert forged.status == 403 and "knowledge_self_review" in forged.text()
    writer = make_key(tenant=tenant, user="erin", roles=("memory_writer",))
    page.context.clear_cookies()
    sign_in(page, base_url, writer, "/console/knowledge")
    assert "needs the knowledge_reviewer role" in page.content()
    after = api.get(f"/knowledge-candidates/{candidate_id}", headers=auth(author)).json()
    assert (after["status"], after["state_version"]) == ("PENDING_REVIEW", shown["state_version"])
