"""The console in a real headless Chromium against the real API, worker, Temporal and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from playwright.sync_api import Page, Route
from sqlalchemy import Engine

from memory.db import global_session
from memory.identity.keys import revoke_key
from tests.conftest import auth
from tests.console.conftest import Team, csrf_of, sign_in, start_task, wait_task, waiting_for_approval


@pytest.fixture()
def api(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


def test_an_approver_sees_the_draft_with_its_charts_approves_it_and_opens_the_published_report(
    page: Page, base_url: str, api: httpx.Client, team: Team
) -> None:
    task_id = start_task(api, team.owner)
    view = wait_task(api, team.owner, task_id, waiting_for_approval)
    sign_in(page, base_url, team.approver, "/console/approvals")
    assert page.url.endswith("/console/approvals")
    page.click(f"a[href='/console/tasks/{task_id}']")
    assert page.inner_text("#draft-sha256") == view["pending_approval"]["artifact_sha256"]
    charts = page.locator("img.chart")
    assert charts.count() >= 2
    page.wait_for_function("[...document.querySelectorAll('img.chart')].every(i => i.complete)")
    widths = page.eval_on_selector_all("img.chart", "imgs => imgs.map(i => i.naturalWidth)")
    assert all(width > 0 for width in widths), widths
    draft = page.frame_locator("iframe.draft")
    assert "Monthly sales report 2026-06" in draft.locator("h1").inner_text()
    assert draft.locator("img").evaluate_all("imgs => imgs.every(i => i.complete && i.naturalWidth > 0)")
    assert page.locator("#rejected tbody tr").count() > 0  # the sample data carries lines validation refuses

    page.click("#approve")
    assert "done=approved" in page.url
    published = wait_task(api, team.owner, task_id, lambda v: v["status"] == "SUCCEEDED")
    assert published["publications"]
    page.reload()
    assert page.inner_text("#task-status") == "SUCCEEDED"
    with page.expect_navigation():  # the title is read once the report has loaded, not while it is on its way
        page.click("#report-link")
    assert page.title() == "Monthly sales report 2026-06 (CNY)"
    assert page.evaluate("[...document.images].every(i => i.naturalWidth > 0)")


FRAME_LAYOUT = """() => {
  const frame = document.querySelector('iframe.draft');
  const doc = frame.contentDocument;
  const rows = [...doc.querySelectorAll('tr')].map(r => r.getBoundingClientRect());
  return {frame: frame.clientHeight, content: doc.documentElement.scrollHeight, rows: rows.length,
          cut: rows.filter(r => r.bottom > frame.clientHeight + 0.5).length,
          font: getComputedStyle(doc.body).fontFamily};
}"""


def test_the_task_page_shows_the_whole_draft_readable_charts_and_a_human_deadline(
    page: Page, base_url: str, api: httpx.Client, team: Team, tmp_path: Path
) -> None:
    task_id = start_task(api, team.owner)
    wait_task(api, team.owner, task_id, waiting_for_approval)
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, base_url, team.approver, f"/console/tasks/{task_id}")
    page.wait_for_selector("iframe.draft[data-fitted=true]")
    layout = page.evaluate(FRAME_LAYOUT)
    page.screenshot(path=str(tmp_path / "task.png"), full_page=True)  # kept with the test's tmp dir for a look
    assert layout["rows"] >= 5 and layout["cut"] == 0, layout  # no table row cut at the frame's edge
    assert layout["frame"] >= layout["content"], layout  # the frame holds the whole draft: nothing scrolls in it
    assert "WenQuanYi Micro Hei" in layout["font"], layout  # a CJK face in the report's font stack
    draft = page.frame_locator("iframe.draft")
    revenue = draft.locator(".figure .value").first.inner_text()
    assert re.fullmatch(r"\d{1,3}(,\d{3})+\.\d{2} CNY", revenue), revenue
    assert re.fullmatch(r"\w{3} \d{1,2} \w{3} \d{4}, \d{2}:\d{2} UTC \(in \d+ (min|h|days)\)",
                        page.inner_text("#deadline")), page.inner_text("#deadline")
    links = page.eval_on_selector_all("a:has(> img.chart)", "links => links.map(a => [a.href, a.firstChild.src])")
    assert len(links) == 3 and all(href == src for href, src in links), links  # each thumbnail opens full size
    widths = page.eval_on_selector_all("img.chart", "imgs => imgs.map(i => i.getBoundingClientRect().width)")
    assert min(widths) >= 480, widths  # two a row at most: axis labels stay legible


def test_a_draft_that_changed_since_the_page_was_opened_is_refused_never_approved(
    page: Page, base_url: str, api: httpx.Client, team: Team
) -> None:
    task_id = start_task(api, team.owner)
    first = wait_task(api, team.owner, task_id, waiting_for_approval)
    sign_in(page, base_url, team.approver, f"/console/tasks/{task_id}")
    shown = page.inner_text("#draft-sha256")
    rejected = api.post(f"/tasks/{task_id}/approvals", headers=auth(team.approver), json={
        "decision": "reject", "artifact_sha256": shown, "state_version": first["state_version"],
        "reason": "name the currency in the title",
    })
    assert rejected.status_code == 200, rejected.text
    revised = wait_task(api, team.owner, task_id, lambda v: waiting_for_approval(v)
                        and v["pending_approval"]["artifact_sha256"] != shown)

    page.click("#approve")  # the page still shows the first draft
    assert page.inner_text("#error-code") == "stale_artifact"
    assert "the draft changed since you read it" in page.inner_text("#error-message")
    assert "Reload the page" in page.inner_text("#error")
    still = wait_task(api, team.owner, task_id, waiting_for_approval)
    assert still["pending_approval"]["artifact_sha256"] == revised["pending_approval"]["artifact_sha256"]
    assert still["state_version"] == revised["state_version"]


def test_without_the_approver_role_there_is_no_approve_button_and_a_forged_post_is_refused(
    page: Page, base_url: str, api: httpx.Client, team: Team
) -> None:
    task_id = start_task(api, team.owner)
    view = wait_task(api, team.owner, task_id, waiting_for_approval)
    sign_in(page, base_url, team.owner, f"/console/tasks/{task_id}")
    assert page.locator("#draft-sha256").count() == 1
    assert page.locator("#approve").count() == 0 and page.locator("a[href='/console/approvals']").count() == 0
    forged = page.request.post(f"{base_url}/console/tasks/{task_id}/decision", form={
        "csrf_token": csrf_of(page), "decision": "approve",
        "artifact_sha256": view["pending_approval"]["artifact_sha256"], "state_version": str(view["state_version"]),
    }, max_redirects=0)
    assert forged.status == 403
    assert "needs the approver role" in forged.text()
    assert wait_task(api, team.owner, task_id, waiting_for_approval)["state_version"] == view["state_version"]


def test_a_post_without_the_sessions_csrf_token_is_refused(
    page: Page, base_url: str, api: httpx.Client, team: Team
) -> None:
    task_id = start_task(api, team.owner)
    view = wait_task(api, team.owner, task_id, waiting_for_approval)
    sign_in(page, base_url, team.approver, f"/console/tasks/{task_id}")
    decision = {"decision": "approve", "artifact_sha256": view["pending_approval"]["artifact_sha256"],
                "state_version": str(view["state_version"])}
    for token in ({}, {"csrf_token": "not-the-token"}):
        refused = page.request.post(f"{base_url}/console/tasks/{task_id}/decision", form={**decision, **token},
                                    max_redirects=0)
        assert refused.status == 403 and "csrf_failed" in refused.text()
    assert wait_task(api, team.owner, task_id, waiting_for_approval)["state_version"] == view["state_version"]


def test_logout_and_a_revoked_key_end_the_session(page: Page, base_url: str, team: Team, engine: Engine) -> None:
    sign_in(page, base_url, team.approver)
    assert page.locator("form.who").count() == 1
    cookie = next(c for c in page.context.cookies() if c["name"] == "mnemo_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.click("form.who button")
    assert "/console/login" in page.url and "you signed out" in page.inner_text("main")
    # the old cookie opens nothing any more
    page.context.add_cookies([{"name": cookie["name"], "value": cookie["value"], "domain": cookie["domain"],
                               "path": cookie["path"]}])
    page.goto(f"{base_url}/console/tasks")
    assert urlparse(page.url).path == "/console/login"

    sign_in(page, base_url, team.operator, "/console/tasks")
    assert urlparse(page.url).path == "/console/tasks"
    with global_session(engine) as session:
        revoke_key(session, team.operator.split("_")[1], actor="test", reason="left the team")
    page.goto(f"{base_url}/console/tasks")
    assert urlparse(page.url).path == "/console/login"
    assert "revoked" in page.inner_text("main")


def test_docs_list_the_operations_with_no_request_leaving_the_machine(page: Page, base_url: str) -> None:
    outside: list[str] = []

    def offline(route: Route) -> None:
        if urlparse(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto(f"{base_url}/docs")
    page.wait_for_selector(".opblock", timeout=20_000)
    assert page.locator(".opblock").count() > 30
    assert page.locator(".opblock-summary-path[data-path='/tasks/{task_id}/approvals']").count() == 1
    assert outside == []
    assert "cdn" not in page.content().lower()
