"""Tasks of any definition on the console (issue 26, item 7): artifacts shown by media type, inert whatever a step
wrote; every artifact by step; the pinned definition's steps; the agent holding a step. Real API, worker, Temporal,
PostgreSQL, and Debian's Chromium for the one check that nothing an artifact carries runs in the page."""

from __future__ import annotations

import hashlib
import html
import json
import re
import struct
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Dialog, Page
from sqlalchemy import Engine

from api.console.render_artifact import CSV_ROWS, INLINE_LIMIT
from api.console.web import goal_text
from memory.db import tenant_session
from memory.tasks import keys, leases, registry
from memory.tasks.builtin import MONTHLY_REPORT_V1
from memory.tasks.contract import ProducedArtifact, StepContext, StepOutcome
from memory.tasks.definition_store import put_definition
from memory.tasks.definitions import from_body
from memory.tasks.pinned import pinned_definition
from memory.tasks.ref import TaskRef
from memory.tasks.states import TaskStatus
from memory.tasks.transitions import NewTask, Transition, insert_task, move
from tests.conftest import MakeKey, auth
from tests.console.conftest import sign_in, wait_task, waiting_for_approval
from tests.console.test_pages import signed_in

FUNCTION = "console-showcase.write"
MARKDOWN = (b"# Incident digest\n\n<script>window.pwned = 1; alert('script')</script>\n\n"
            b"[open me](javascript:alert('link')) and <img src=x onerror=\"alert('img')\">\n\n"
            b"![pixel](https://tracker.example/pixel.png)\n\n**Three** incidents.\n")
ANSWER = {"verdict": "<b>ship</b>", "actions": ["page on-call"]}
CSV_LEFT_OUT = 50
CSV = ("service,incidents\n<i>api</i>,1\n" + "".join(f"svc-{n},{n}\n" for n in range(CSV_ROWS + CSV_LEFT_OUT - 1)))
NOTES = b"plain <b>text</b>, not markup"
PAGE = b"<!doctype html><title>page</title><h1>HTML artifact</h1><script>alert('html')</script>"


def png() -> bytes:
    """A real 1x1 RGB PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) \
        + chunk(b"IEND", b"")


ARTIFACTS = {  # name -> (media type, bytes)
    "digest.md": ("text/markdown; charset=utf-8", MARKDOWN),
    "answer.json": ("application/json", json.dumps(ANSWER).encode()),
    "table.csv": ("text/csv", CSV.encode()),
    "chart.png": ("image/png", png()),
    "notes.txt": ("text/plain", NOTES),
    "page.html": ("text/html", PAGE),
    "blob.bin": ("application/octet-stream", b"\x00\x01binary"),
    "big.json": ("application/json", json.dumps(["x" * 1000] * (INLINE_LIMIT // 1000 + 1)).encode()),
    "checks.txt": ("text/plain", b"3 passed"),  # kind "validation", not the monthly report's lines (not even JSON)
}
ARTIFACTS["manifest.json"] = ("application/json", json.dumps({  # the manifest convention, outside the monthly report
    "title": "Showcase page", "html_sha256": hashlib.sha256(PAGE).hexdigest(),
    "charts": {"tiny": hashlib.sha256(ARTIFACTS["chart.png"][1]).hexdigest()}}).encode())


def write(ctx: StepContext) -> StepOutcome:
    """The showcase's compute step: one artifact of each kind the console must show."""
    return StepOutcome({"artifacts": len(ARTIFACTS)}, [
        ProducedArtifact(name, "validation" if name == "checks.txt" else "output", media_type, content)
        for name, (media_type, content) in ARTIFACTS.items()])


DEFINITION = {
    "version": "1", "goal_schema": {"type": "object"}, "redraft_step": "write",
    "steps": [{"step_id": "write", "kind": "compute", "function": FUNCTION},
              {"step_id": "review", "kind": "approval", "artifact_from": "write/digest.md"},
              {"step_id": "send", "kind": "publish", "destination": "reports"}],
}


@dataclass(frozen=True)
class Showcase:
    tenant: str
    admin: str
    owner: str
    approver: str
    task_id: str
    shas: dict[str, str]
    """Artifact name -> sha256."""


def register(client: TestClient | httpx.Client, admin: str, task_type: str, body: dict[str, Any]) -> None:
    response = client.put(f"/task-definitions/{task_type}", json=body, headers=auth(admin))
    assert response.status_code == 201, response.text


def start_showcase(client: TestClient, owner: str) -> str:
    """A task of the showcase type, once it waits for approval of its Markdown digest."""
    created = client.post("/tasks", headers=auth(owner), json={
        "task_type": "showcase", "request_intent_id": uuid.uuid4().hex, "goal": {}})
    assert created.status_code == 201, created.text
    task_id = str(created.json()["task_id"])
    view = wait_task(client, owner, task_id, lambda v: waiting_for_approval(v) or v["status"] == "FAILED")
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    assert view["pending_approval"]["artifact_sha256"] == hashlib.sha256(MARKDOWN).hexdigest()
    return task_id


@pytest.fixture(scope="module")
def showcase(https_client: TestClient, make_key: MakeKey) -> Showcase:
    """A tenant's own type (registered over REST; its compute step a function the worker loaded) and a task of it
    waiting for approval. Tests that change a task start their own."""
    registry.declare_function(FUNCTION, write)
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, user="ada", roles=("admin",))
    owner = make_key(tenant=tenant, user="alice", roles=("memory_writer",))
    register(https_client, admin, "showcase", DEFINITION)
    return Showcase(tenant, admin, owner, make_key(tenant=tenant, user="bob", roles=("approver",)),
                    start_showcase(https_client, owner),
                    {name: hashlib.sha256(content).hexdigest() for name, (_, content) in ARTIFACTS.items()})


def viewed(client: TestClient, show: Showcase, name: str) -> str:
    """The task page with the artifact ``name`` picked from the list: its ``#viewed`` section."""
    response = client.get(f"/console/tasks/{show.task_id}", params={"artifact": show.shas[name]})
    assert response.status_code == 200, response.text
    match = re.search(r'<section class="card" id="viewed">(.*?)</section>', response.text, re.S)
    assert match, response.text
    return match.group(1)


def test_markdown_under_approval_is_rendered_and_nothing_it_carries_is_live(
    https_client: TestClient, showcase: Showcase
) -> None:
    signed_in(https_client, showcase.approver)
    text = https_client.get(f"/console/tasks/{showcase.task_id}").text
    draft = re.search(r'<section class="card" id="draft">(.*?)</section>', text, re.S)
    assert draft, text
    shown = draft.group(1)
    assert "<h1>Incident digest</h1>" in shown and "<strong>Three</strong> incidents." in shown
    assert "&lt;script&gt;window.pwned = 1;" in shown and "<script" not in shown  # raw HTML is text
    assert "&lt;img src=x onerror=" in shown and "<img" not in shown  # neither the raw tag nor the remote pixel
    assert "[open me](javascript:alert('link'))" in shown and 'href="javascript' not in text.lower()  # text only
    assert '<a href="https://tracker.example/pixel.png" rel="noopener noreferrer">pixel (image not loaded)</a>' \
        in shown
    assert f'id="draft-sha256">{showcase.shas["digest.md"]}<' in shown
    assert 'id="approve"' in shown  # the approver decides on what they see


def test_the_page_lists_every_artifact_by_step_and_the_definitions_steps(
    https_client: TestClient, showcase: Showcase
) -> None:
    signed_in(https_client, showcase.owner)
    text = https_client.get(f"/console/tasks/{showcase.task_id}").text
    rows = re.findall(r'<tr data-sha256="([0-9a-f]{64})"><td><code>(\w+)</code></td><td>([^<]+)</td>'
                      r'<td>([^<]+)</td><td>([^<]+)</td>', text)
    assert sorted((name, step, media) for _, step, name, media, _ in rows) == sorted(
        (name, "write", html.escape(media)) for name, (media, _) in ARTIFACTS.items())
    assert {name: sha for sha, _, name, _, _ in rows} == showcase.shas
    sizes = {name: size for _, _, name, _, size in rows}
    assert sizes["notes.txt"] == f"{len(NOTES)} B" and sizes["big.json"].endswith(" KiB")
    for sha in showcase.shas.values():
        assert f'href="/console/tasks/{showcase.task_id}/artifacts/{sha}"' in text
    steps = re.findall(r'<li data-step="(\w+)"><code>\w+</code> · (\w+)( · done| · <strong>current</strong>)?', text)
    assert steps == [("write", "compute", " · done"), ("review", "approval", " · <strong>current</strong>"),
                     ("send", "publish", "")]


def test_json_csv_text_image_html_and_other_types_each_show_as_they_should(
    https_client: TestClient, showcase: Showcase
) -> None:
    signed_in(https_client, showcase.owner)
    answer = viewed(https_client, showcase, "answer.json")
    assert "&#34;verdict&#34;: &#34;&lt;b&gt;ship&lt;/b&gt;&#34;" in answer and "<b>" not in answer
    assert '<pre class="artifact-text artifact-body">{\n  &#34;verdict&#34;' in answer  # pretty-printed
    table = viewed(https_client, showcase, "table.csv")
    assert table.count("<tr>") == 1 + CSV_ROWS  # the header and the first 200 rows
    assert "<th>service</th><th>incidents</th>" in table and "<td>&lt;i&gt;api&lt;/i&gt;</td>" in table
    assert f"The first {CSV_ROWS} rows are shown; {CSV_LEFT_OUT} more are left out" in table
    notes = viewed(https_client, showcase, "notes.txt")
    assert "<pre class=\"artifact-text artifact-body\">plain &lt;b&gt;text&lt;/b&gt;, not markup</pre>" in notes
    chart = viewed(https_client, showcase, "chart.png")
    url = f"/console/tasks/{showcase.task_id}/artifacts/{showcase.shas['chart.png']}"
    assert f'<img src="{url}" alt="chart.png">' in chart
    served = https_client.get(url)
    assert served.status_code == 200 and served.headers["content-type"] == "image/png"
    assert served.content == ARTIFACTS["chart.png"][1]
    page_html = viewed(https_client, showcase, "page.html")
    assert re.search(r'<iframe class="draft" title="page.html" src="[^"]+" sandbox="allow-same-origin">', page_html)
    own_page = https_client.get(f"/console/tasks/{showcase.task_id}/artifacts/{showcase.shas['page.html']}")
    policy = [d.strip() for d in own_page.headers["content-security-policy"].split(";")]
    # Opened alone (not framed), an agent's HTML runs nothing and can post no form: no phishing on our origin.
    assert {"sandbox allow-same-origin", "form-action 'none'", "base-uri 'none'", "default-src 'none'"} <= set(policy)
    assert "<script" not in page_html
    manifest = viewed(https_client, showcase, "manifest.json")
    base = f"/console/tasks/{showcase.task_id}/artifacts"
    assert "<h2>Showcase page</h2>" in manifest  # a manifest's title, no revision named
    assert f'id="draft-frame" title="The report as it will be published" src="{base}/{showcase.shas["page.html"]}"' \
        in manifest
    assert f'<img class="chart" src="{base}/{showcase.shas["chart.png"]}" alt="tiny chart">' in manifest
    assert "Rejected by validation" not in manifest  # its "validation" artifact is not a list of rejected lines
    blob = viewed(https_client, showcase, "blob.bin")
    assert 'download="blob.bin">Download blob.bin</a> (application/octet-stream, 8 B)' in blob
    assert "application/octet-stream is not shown here" in blob
    big = viewed(https_client, showcase, "big.json")
    assert 'download="big.json">Download big.json</a>' in big and "is too large to show here (at most 256.0 KiB)" in big
    assert "xxxx" not in big


def test_an_artifact_of_another_task_or_tenant_is_the_pages_404(
    https_client: TestClient, showcase: Showcase, make_key: MakeKey
) -> None:
    signed_in(https_client, make_key(roles=("approver",)))  # another tenant's approver
    for params in ({}, {"artifact": showcase.shas["answer.json"]}):
        assert https_client.get(f"/console/tasks/{showcase.task_id}", params=params).status_code == 404
    signed_in(https_client, showcase.owner)
    missing = https_client.get(f"/console/tasks/{showcase.task_id}", params={"artifact": "0" * 64})
    assert missing.status_code == 404 and "does not exist" in missing.text


def test_the_approvals_page_says_what_is_asked_and_the_published_markdown_is_shown_inert(
    https_client: TestClient, showcase: Showcase
) -> None:
    signed_in(https_client, showcase.approver)
    inbox = https_client.get("/console/approvals").text
    row = re.search(rf'<a class="task-link" href="/console/tasks/{showcase.task_id}">.*?</tr>', inbox, re.S)
    assert row, inbox
    assert "<td>showcase</td>" in row.group(0)
    assert "<code>write</code> · digest.md (text/markdown; charset=utf-8, " in row.group(0)

    task_id = start_showcase(https_client, showcase.owner)
    report = f"/console/tasks/{task_id}/report"
    early = https_client.get(report)
    assert early.status_code == 404 and "has published nothing yet (it is WAITING_FOR_APPROVAL)" in early.text
    view = wait_task(https_client, showcase.owner, task_id, waiting_for_approval)
    approved = https_client.post(f"/tasks/{task_id}/approvals", headers=auth(showcase.approver), json={
        "decision": "approve", "artifact_sha256": showcase.shas["digest.md"], "state_version": view["state_version"]})
    assert approved.status_code == 200, approved.text
    wait_task(https_client, showcase.owner, task_id, lambda v: v["status"] == "SUCCEEDED")
    published = https_client.get(report)
    assert published.status_code == 200 and published.headers["content-type"].startswith("text/html")
    assert f'id="published-sha256">{showcase.shas["digest.md"]}<' in published.text
    assert "<h1>Incident digest</h1>" in published.text and "&lt;script&gt;window.pwned" in published.text
    assert "<script" not in published.text.split("</main>")[0]


def agent_task(engine: Engine, tenant: str, task_type: str, version: str) -> str:
    """Alice's task of ``task_type``/``version`` as the engine records one waiting for an agent at ``collect``
    (read model rows, written by the functions its activities run; no workflow, so the page reads the read model)."""
    intent = uuid.uuid4().hex
    ref = TaskRef(tenant, keys.task_id_for(tenant, "alice", intent))
    with tenant_session(engine, tenant) as session:
        insert_task(session, NewTask(
            ref=ref, owner_user_id="alice", task_type=task_type, goal={"service": "api"}, request_intent_id=intent,
            create_key=keys.create_key(tenant, "alice", intent), destination="archive", workflow_id=ref.workflow_id,
            run_id=None, workflow_version=version, transition_id=f"create:{ref.task_id}"))
        moved = move(session, ref, Transition(1, f"{ref.task_id}:start", TaskStatus.RUNNING, current_step_id="collect"))
        leases.open_agent_step(session, ref, step_id="collect", input_version="1", extra={},
                               expected_version=moved.state_version)
    return ref.task_id


def test_a_task_waiting_for_an_agent_says_which_step_and_who_holds_it_until_when(
    https_client: TestClient, engine: Engine, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin = make_key(tenant=tenant, user="ada", roles=("admin",))
    owner = make_key(tenant=tenant, user="alice")
    register(https_client, admin, "digest", {
        "version": "1", "goal_schema": {"type": "object"},
        "steps": [{"step_id": "collect", "kind": "agent", "description": "collect the week's incidents"},
                  {"step_id": "review", "kind": "approval", "artifact_from": "collect/digest.md"},
                  {"step_id": "send", "kind": "publish", "destination": "archive"}], "redraft_step": "collect"})
    task_id = agent_task(engine, tenant, "digest", "1")
    signed_in(https_client, owner)
    before = https_client.get(f"/console/tasks/{task_id}").text
    assert "Waiting for an agent to perform step <code>collect</code>" in before
    assert f"No agent holds it: an agent claims it with <code>POST /tasks/{task_id}/attempts</code>" in before
    assert re.findall(r'<li data-step="(\w+)"><code>\w+</code> · (\w+)', before) == [
        ("collect", "agent"), ("review", "approval"), ("send", "publish")]
    assert "collect the week&#39;s incidents" in before

    claimed = https_client.post(f"/tasks/{task_id}/attempts", json={"lease_seconds": 600}, headers=auth(owner))
    assert claimed.status_code == 201, claimed.text
    attempt = next(e for e in https_client.get(f"/tasks/{task_id}/timeline", headers=auth(owner)).json()["entries"]
                   if e["kind"] == "attempt")
    after = https_client.get(f"/console/tasks/{task_id}").text
    claim = re.search(r'<p id="agent-claim">(.*?)</p>', after, re.S)
    assert claim, after
    assert f"Claimed by <strong>{attempt['actor']}</strong> (attempt 1) since" in claim.group(1)
    assert re.search(r"until <time[^>]*>\w{3} \d{1,2} \w{3} \d{4}, \d{2}:\d{2} UTC \(in (9|10) min\)</time>",
                     claim.group(1)), claim.group(1)


def test_the_pinned_version_is_found_where_it_came_from(engine: Engine, make_key: MakeKey) -> None:
    """A code type at the version its module declares now (and the frozen monthly-report-v1), a tenant's registered
    version (not another tenant's), and nothing for a version no longer declared."""
    tenant, other = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)
    make_key(tenant=other)
    body = {"version": "1", "goal_schema": {"type": "object"}, "steps": [{"step_id": "collect", "kind": "agent"}]}
    with tenant_session(engine, tenant) as session:
        put_definition(session, tenant, from_body("weekly", body), "ada")
    with tenant_session(engine, tenant) as session:
        monthly = pinned_definition(session, tenant, "monthly-report", "monthly-report-v1")
        assert monthly is not None and monthly.sha256 == MONTHLY_REPORT_V1.sha256
        assert [step.kind for step in monthly.steps][-2:] == ["approval", "publish"]
        assert pinned_definition(session, tenant, "monthly-report", "monthly-report-v0") is None
        weekly = pinned_definition(session, tenant, "weekly", "1")
        assert weekly is not None and [(s.step_id, s.kind) for s in weekly.steps] == [("collect", "agent")]
        assert pinned_definition(session, tenant, "weekly", "2") is None
    with tenant_session(engine, other) as session:
        assert pinned_definition(session, other, "weekly", "1") is None


def test_a_version_that_cannot_be_found_shows_the_steps_its_records_name(
    https_client: TestClient, engine: Engine, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    owner = make_key(tenant=tenant, user="alice")
    task_id = agent_task(engine, tenant, "forgotten", "7")
    signed_in(https_client, owner)
    text = https_client.get(f"/console/tasks/{task_id}").text
    steps = re.findall(r'<li data-step="(\w+)"><code>\w+</code> · (kind unknown|\w+)', text)
    assert steps == [("collect", "kind unknown")]
    assert "The definition version 7 this task started with is no longer known here" in text


def test_in_a_browser_a_markdown_artifact_runs_nothing(
    page: Page, base_url: str, showcase: Showcase, tmp_path: Path
) -> None:
    dialogs: list[str] = []

    def seen(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", seen)
    digest = showcase.shas["digest.md"]
    sign_in(page, base_url, showcase.approver, f"/console/tasks/{showcase.task_id}?artifact={digest}")
    page.wait_for_load_state("networkidle")
    assert page.locator("#viewed .markdown h1").inner_text() == "Incident digest"
    assert page.locator("#draft .markdown h1").inner_text() == "Incident digest"
    page.locator("#viewed .markdown p", has_text="open me").click()
    assert page.evaluate("window.pwned") is None and dialogs == []
    assert page.eval_on_selector_all(".markdown a", "links => links.map(a => a.protocol)") == ["https:", "https:"]
    assert page.eval_on_selector_all(".markdown img", "imgs => imgs.length") == 0
    page.screenshot(path=str(tmp_path / "markdown.png"), full_page=True)  # kept with the test's tmp dir for a look


def test_a_goal_of_any_definition_is_shown_with_its_field_names() -> None:
    assert goal_text({"month": "2026-06", "currency": "CNY"}) == "month 2026-06 · currency CNY"
    assert goal_text({"service": "checkout", "window": {"days": 7}, "urgent": True}) == \
        'service checkout · window {"days": 7} · urgent true'
