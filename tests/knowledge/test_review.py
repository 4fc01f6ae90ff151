"""Reviewing knowledge candidates: the review workflow, its Update and the HTTP surface, against the real
PostgreSQL and a real Temporal worker; reminders go to a stand-in webhook receiver (a real HTTP server)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from temporalio.api.history.v1 import History
from typer.testing import CliRunner, Result

from api.cli.app import app
from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from memory.db import tenant_session
from memory.knowledge.candidates import Author
from memory.knowledge.candidates import propose as knowledge_propose
from memory.knowledge.content import parse_proposal
from memory.knowledge.review import revise
from tests.conftest import MakeKey, auth, poll
from tests.observability.webhook_standin import webhook_receiver
from tests.workers import api_with_worker, served
from workflows.knowledge_review import KnowledgeReviewSweepInput, KnowledgeReviewSweepWorkflow, workflow_id

SECRET = "a-webhook-secret-of-some-length"
PHONE, EMAIL, OTHER_PHONE = "13800138000", "wang.fang@example.com", "+1 415 555 0134"


@pytest.fixture(scope="module")
def api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    """An API and worker of the module's own, allowed to reach the loopback webhook stand-in."""
    with api_with_worker(settings, engine, "kreview", webhook_allowed_hosts="127.0.0.1") as client:
        yield client


@pytest.fixture(scope="module")
def own(api: TestClient) -> Settings:
    """The settings of the module's API and worker."""
    settings: Settings = api.app.state.settings  # type: ignore[attr-defined]
    return settings


@dataclass(frozen=True)
class Team:
    tenant: str
    author: str
    reviewer: str
    second_reviewer: str
    bot_reviewer: str
    writer: str
    approver: str


@pytest.fixture()
def team(make_key: MakeKey) -> Team:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    return Team(
        tenant=tenant,
        author=make_key(tenant=tenant, user="alice", roles=("memory_writer", "knowledge_reviewer")),
        reviewer=make_key(tenant=tenant, user="bob", roles=("knowledge_reviewer",)),
        second_reviewer=make_key(tenant=tenant, user="carol", roles=("knowledge_reviewer",)),
        bot_reviewer=make_key(tenant=tenant, user="dan", roles=("knowledge_reviewer",), agent="planner"),
        writer=make_key(tenant=tenant, user="erin", roles=("memory_writer",)),
        approver=make_key(tenant=tenant, user="fay", roles=("approver",)),
    )


def proposal(claim: str, key: str = "report.publish_policy", **extra: Any) -> dict[str, Any]:
    return {"key": key, "claim": claim, "authority": "P0", "scope": {"type": "TENANT"},
            "source_refs": ["doc:finance-handbook#4"], **extra}


def propose(api: TestClient, key: str, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/knowledge-candidates", json=body, headers=auth(key))
    assert response.status_code == 201, response.text
    return dict(response.json())


def read(api: TestClient, key: str, candidate_id: str) -> dict[str, Any]:
    response = api.get(f"/knowledge-candidates/{candidate_id}", headers=auth(key))
    assert response.status_code == 200, response.text
    return dict(response.json())


def review(api: TestClient, key: str, shown: dict[str, Any], decision: str = "approve", **extra: Any) -> Any:
    body = {"decision": decision, "content_sha256": shown["content_sha256"], "state_version": shown["state_version"],
            **extra}
    return api.post(f"/knowledge-candidates/{shown['candidate_id']}/reviews", json=body, headers=auth(key))


def code_of(response: Any) -> str:
    return str(response.json()["error"]["code"])


def test_the_201_body_is_the_issue_s(api: TestClient, team: Team) -> None:
    created = propose(api, team.author, proposal(f"Reports need finance sign-off; ask {EMAIL}"))
    assert set(created) == {"candidate_id", "status", "version", "content_sha256", "redactions", "duplicates",
                            "conflicts"}
    assert (created["status"], created["version"]) == ("PENDING_REVIEW", 1)
    assert created["redactions"] == [{"kind": "email", "path": "claim"}]
    shown = read(api, team.reviewer, created["candidate_id"])
    assert EMAIL not in shown["claim"] and shown["review_deadline"] is not None
    again = api.post("/knowledge-candidates", json={**proposal("idempotent claim"), "idempotency_key": "k1"},
                     headers=auth(team.author))
    replay = api.post("/knowledge-candidates", json={**proposal("idempotent claim"), "idempotency_key": "k1"},
                      headers=auth(team.author))
    assert (again.status_code, replay.status_code) == (201, 200)
    assert again.json()["candidate_id"] == replay.json()["candidate_id"]


def test_only_another_person_holding_the_reviewer_role_decides(api: TestClient, team: Team) -> None:
    shown = read(api, team.author, propose(api, team.author, proposal("Reports need finance sign-off"))["candidate_id"])
    refusals = {team.author: "knowledge_self_review", team.bot_reviewer: "knowledge_agent_review",
                team.writer: "forbidden", team.approver: "forbidden"}
    for key, code in refusals.items():
        response = review(api, key, shown)
        assert response.status_code == 403, response.text
        assert code_of(response) == code
    unchanged = read(api, team.reviewer, shown["candidate_id"])
    assert (unchanged["status"], unchanged["state_version"]) == ("PENDING_REVIEW", shown["state_version"])
    approved = review(api, team.reviewer, shown)
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert body["candidate"]["status"] == "APPROVED" and body["replayed"] is False
    item = body["knowledge"]
    assert (item["version"], item["status"], item["reviewer_user_id"], item["author_user_id"]) == (
        1, "ACTIVE", "bob", "alice")
    assert item["embedding_model"] is not None  # the worker's embedder vectorised it as it was published


def test_a_stale_hash_or_state_version_and_a_missing_reason_are_refused(api: TestClient, team: Team) -> None:
    shown = read(api, team.author, propose(api, team.author, proposal("Stale checks"))["candidate_id"])
    stale_hash = review(api, team.reviewer, {**shown, "content_sha256": "0" * 64})
    assert (stale_hash.status_code, code_of(stale_hash)) == (409, "knowledge_hash_mismatch")
    stale_version = review(api, team.reviewer, {**shown, "state_version": shown["state_version"] + 5})
    assert (stale_version.status_code, code_of(stale_version)) == (409, "knowledge_state_version_mismatch")
    for decision in ("reject", "request_changes"):
        unexplained = review(api, team.reviewer, shown, decision)
        assert (unexplained.status_code, code_of(unexplained)) == (422, "reason_required")
    assert read(api, team.reviewer, shown["candidate_id"])["status"] == "PENDING_REVIEW"
    rejected = review(api, team.reviewer, shown, "reject", reason=f"no source; call me on {PHONE}")
    assert rejected.status_code == 200, rejected.text
    candidate = rejected.json()["candidate"]
    assert candidate["status"] == "REJECTED" and PHONE not in candidate["decision_reason"]
    assert "[REDACTED:phone]" in candidate["decision_reason"]
    again = review(api, team.second_reviewer, shown, "approve")
    assert (again.status_code, code_of(again)) == (409, "knowledge_candidate_closed")


def test_a_conflict_published_after_opening_is_shown_before_anything_is_superseded(
    api: TestClient, team: Team
) -> None:
    first = read(api, team.author, propose(api, team.author, proposal("Reports need finance approval"))["candidate_id"])
    second = read(api, team.author, propose(api, team.author, proposal("Reports need no approval at all"))[
        "candidate_id"])
    assert first["conflicts"] == [] and second["conflicts"] == []
    published = review(api, team.reviewer, second).json()["knowledge"]
    conflicted = review(api, team.reviewer, first)
    assert (conflicted.status_code, code_of(conflicted)) == (409, "knowledge_conflicts_changed")
    looked_again = read(api, team.reviewer, first["candidate_id"])
    assert looked_again["status"] == "PENDING_REVIEW"
    assert looked_again["state_version"] == first["state_version"] + 1
    assert [c["knowledge_id"] for c in looked_again["conflicts"]] == [published["knowledge_id"]]
    assert looked_again["conflicts"][0]["claim"] == "Reports need no approval at all"
    items = api.get("/knowledge", params={"key": "report.publish_policy"}, headers=auth(team.writer)).json()["items"]
    assert [(i["version"], i["status"]) for i in items] == [(1, "ACTIVE")]  # nothing superseded unseen
    approved = review(api, team.reviewer, looked_again)
    assert approved.status_code == 200, approved.text
    assert (approved.json()["knowledge"]["version"], approved.json()["knowledge"]["supersedes_version"]) == (2, 1)
    versions = api.get(f"/knowledge/{published['knowledge_id']}", headers=auth(team.writer)).json()["versions"]
    assert [(v["version"], v["status"]) for v in versions] == [(2, "ACTIVE"), (1, "SUPERSEDED")]
    superseded = api.get("/knowledge", params={"status": "SUPERSEDED", "authority": "P0", "scope": "TENANT"},
                         headers=auth(team.writer)).json()["items"]
    assert [(i["knowledge_id"], i["version"]) for i in superseded] == [(published["knowledge_id"], 1)]


def test_request_changes_then_the_author_revises_and_it_is_approved(api: TestClient, team: Team) -> None:
    shown = read(api, team.author, propose(api, team.author, proposal("Monthly reports go out on day 3"))[
        "candidate_id"])
    sent_back = review(api, team.reviewer, shown, "request_changes", reason="which day exactly?")
    assert sent_back.status_code == 200, sent_back.text
    replay = review(api, team.reviewer, shown, "request_changes", reason="which day exactly?")
    assert replay.status_code == 200 and replay.json()["candidate"]["state_version"] == shown["state_version"] + 1
    path = f"/knowledge-candidates/{shown['candidate_id']}"
    revised_body = {**proposal("Monthly reports go out on the 5th working day"), "version": 1}
    assert api.put(path, json=revised_body, headers=auth(team.writer)).status_code == 404  # not their candidate
    stale = api.put(path, json={**revised_body, "version": 7}, headers=auth(team.author))
    assert (stale.status_code, code_of(stale)) == (409, "version_conflict")
    revised = api.put(path, json=revised_body, headers=auth(team.author))
    assert revised.status_code == 200, revised.text
    now = revised.json()
    assert (now["status"], now["version"]) == ("PENDING_REVIEW", 2)
    assert now["content_sha256"] != shown["content_sha256"]
    old = review(api, team.reviewer, {**shown, "state_version": now["state_version"]})
    assert (old.status_code, code_of(old)) == (409, "knowledge_hash_mismatch")
    approved = review(api, team.reviewer, now)
    assert approved.status_code == 200, approved.text
    assert approved.json()["knowledge"]["claim"] == "Monthly reports go out on the 5th working day"
    replayed = review(api, team.reviewer, now)
    assert replayed.status_code == 200 and replayed.json()["replayed"] is True
    assert replayed.json()["knowledge"] == approved.json()["knowledge"]
    late = api.put(path, json={**revised_body, "version": 2}, headers=auth(team.author))
    assert (late.status_code, code_of(late)) == (409, "knowledge_not_changes_requested")


def test_reads_follow_the_reviewer_role_and_the_tenant(api: TestClient, team: Team, make_key: MakeKey) -> None:
    mine = propose(api, team.author, proposal("Alice's claim"))["candidate_id"]
    theirs = propose(api, team.writer, proposal("Erin's claim", key="other.key"))["candidate_id"]
    listed = {c["candidate_id"] for c in api.get("/knowledge-candidates", headers=auth(team.reviewer)).json()["items"]}
    assert {mine, theirs} <= listed
    own = api.get("/knowledge-candidates", params={"status": "PENDING_REVIEW"}, headers=auth(team.writer)).json()
    assert [c["candidate_id"] for c in own["items"]] == [theirs]
    assert api.get(f"/knowledge-candidates/{mine}", headers=auth(team.writer)).status_code == 404
    stranger = make_key(user="bob", roles=("admin",))
    item = review(api, team.reviewer, read(api, team.reviewer, theirs)).json()["knowledge"]
    for method, path, body in (("GET", f"/knowledge-candidates/{mine}", None),
                               ("PUT", f"/knowledge-candidates/{mine}", {**proposal("x"), "version": 1}),
                               ("POST", f"/knowledge-candidates/{mine}/reviews",
                                {"decision": "approve", "content_sha256": "0" * 64, "state_version": 1}),
                               ("GET", f"/knowledge/{item['knowledge_id']}", None),
                               ("GET", "/knowledge-candidates/not-a-uuid", None)):
        response = api.request(method, path, json=body, headers=auth(stranger))
        assert response.status_code == 404, (method, path, response.text)
    assert api.get("/knowledge", headers=auth(stranger)).json()["items"] == []


def _history_bytes(settings: Settings, wid: str) -> tuple[bytes, str]:
    import asyncio

    async def fetch() -> tuple[bytes, str]:
        client = await connect(settings)
        history = await client.get_workflow_handle(wid).fetch_history()
        return History(events=history.events).SerializeToString(), history.to_json()

    return asyncio.run(fetch())


def test_the_review_history_holds_no_claim_nor_personal_data(
    api: TestClient, team: Team, own: Settings, engine: Engine
) -> None:
    claim = f"Escalations go to Wang Fang ({PHONE}, {EMAIL}) before the zebracorn release"
    created = propose(api, team.author, proposal(claim, key="escalation.owner",
                                                 evidence=[{"quote": f"mail {EMAIL} or call {PHONE}"}]))
    assert {r["kind"] for r in created["redactions"]} == {"phone", "email"}
    shown = read(api, team.author, created["candidate_id"])
    sent_back = review(api, team.reviewer, shown, "request_changes", reason=f"drop the number {OTHER_PHONE}")
    assert sent_back.status_code == 200, sent_back.text
    revised = api.put(f"/knowledge-candidates/{shown['candidate_id']}", headers=auth(team.author), json={
        **proposal(f"Escalations go to the on-call lead ({OTHER_PHONE}) before the zebracorn release",
                   key="escalation.owner"), "version": 1})
    assert revised.status_code == 200, revised.text
    assert review(api, team.reviewer, revised.json()).status_code == 200
    wid = workflow_id(team.tenant, shown["candidate_id"])
    raw, as_json = _history_bytes(own, wid)
    for secret in (PHONE, EMAIL, OTHER_PHONE, "415 555", "zebracorn", "Wang Fang", "on-call lead"):
        assert secret.encode() not in raw and secret not in as_json, secret
    assert b"request_changes" in raw and shown["content_sha256"].encode() in raw  # the history is the one we think
    with tenant_session(engine, team.tenant) as session:
        rows = session.execute(text("SELECT row_to_json(c)::text FROM knowledge_candidates c UNION ALL "
                                    "SELECT row_to_json(i)::text FROM knowledge_items i")).scalars().all()
    assert rows and not any(value in row for row in rows for value in (PHONE, EMAIL, "415 555"))


def test_nobody_reviews_reminders_reach_the_webhook_then_it_expires(
    api: TestClient, own: Settings, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    author = make_key(tenant=tenant, user="alice", roles=("memory_writer",))
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    short = own.model_copy(update={"knowledge_review_deadline_seconds": 6.0,
                                   "knowledge_review_reminder_seconds": 1.5})
    with webhook_receiver() as receiver, TestClient(create_app(short)) as hurried:
        put = api.put("/tenant-webhook", json={"url": receiver.url, "secret": SECRET}, headers=auth(admin))
        assert put.status_code == 200, put.text
        created = propose(hurried, author, proposal("Nobody will look at this zebracorn claim"))
        expired = poll(api, admin, f"/knowledge-candidates/{created['candidate_id']}",
                       lambda c: c["status"] == "EXPIRED", timeout=60)
        deadline = time.monotonic() + 10
        while not receiver.deliveries and time.monotonic() < deadline:
            time.sleep(0.1)
    assert expired["reminders_sent"] >= 1
    messages = [json.loads(d.body) for d in receiver.deliveries]
    assert messages and {m["type"] for m in messages} == {"knowledge_review_reminder"}
    assert {d.headers["x-mnemo-event"] for d in receiver.deliveries} == {"knowledge_review_reminder"}
    first = messages[0]
    assert (first["candidate_id"], first["reminder_number"]) == (created["candidate_id"], 1)
    assert set(first) == {"type", "tenant_id", "candidate_id", "reminder_number", "content_sha256", "state_version",
                          "deadline_at"}
    assert not any(b"zebracorn" in d.body for d in receiver.deliveries)
    late = review(api, admin, expired)
    assert (late.status_code, code_of(late)) == (409, "knowledge_candidate_closed")


def test_the_cli_proposes_shows_and_reviews(own: Settings, team: Team, tmp_path: Path) -> None:
    file = tmp_path / "claim.json"
    file.write_text(json.dumps(proposal(f"Finance signs every report; write to {EMAIL}", key="cli.claim")))
    with served(create_app(own)) as port:
        def cli(key: str, *args: str) -> Result:
            return CliRunner().invoke(app, [*args, "--api-url", f"http://127.0.0.1:{port}", "--key", key])

        proposed = cli(team.author, "knowledge", "propose", str(file))
        assert proposed.exit_code == 0, proposed.output
        assert "redacted email at claim" in proposed.output and EMAIL not in proposed.output
        candidate_id = proposed.output.split()[1]
        listed = cli(team.reviewer, "knowledge", "list", "--status", "PENDING_REVIEW")
        assert candidate_id in listed.output, listed.output
        shown = cli(team.reviewer, "knowledge", "show", candidate_id)
        assert "redacted         email at claim" in shown.output, shown.output
        view = json.loads(cli(team.reviewer, "knowledge", "show", candidate_id, "--json").output)
        own_review = cli(team.author, "knowledge", "review", candidate_id, "--decision", "approve",
                         "--sha", view["content_sha256"], "--version", str(view["state_version"]))
        assert own_review.exit_code != 0 and "knowledge_self_review" in own_review.output
        approved = cli(team.reviewer, "knowledge", "review", candidate_id, "--decision", "approve",
                       "--sha", view["content_sha256"], "--version", str(view["state_version"]))
        assert approved.exit_code == 0, approved.output
        assert "status           APPROVED" in approved.output and "published" in approved.output
        published = cli(team.writer, "knowledge", "list", "--published")
        assert "cli.claim" in published.output, published.output


def _sweep(own: Settings) -> int:
    async def run() -> int:
        temporal = await connect(own)
        return int(await temporal.execute_workflow(
            KnowledgeReviewSweepWorkflow.run, KnowledgeReviewSweepInput(), id=f"ksweep-{uuid.uuid4().hex[:8]}",
            task_queue=own.task_queue))

    return asyncio.run(run())


def test_a_candidate_a_pipeline_opened_gets_its_review_from_the_sweep(
        api: TestClient, own: Settings, team: Team, engine: Engine) -> None:
    """A session commit, a finished task or a deletion's re-review opens a candidate in the worker, which starts no
    workflow: the sweep starts its review (once), which gives it a deadline; then a reviewer decides as usual."""
    opened = datetime.now(UTC) - timedelta(minutes=2)
    with tenant_session(engine, team.tenant) as session:
        candidate = knowledge_propose(session, Author(team.tenant, "alice"), parse_proposal(
            proposal("Incidents are written up within two days")), opened).candidate
        candidate_id = str(candidate.candidate_id)
    assert read(api, team.reviewer, candidate_id)["review_deadline"] is None
    early = review(api, team.reviewer, read(api, team.reviewer, candidate_id))  # no review workflow yet
    assert early.status_code == 409 and code_of(early) == "knowledge_review_starting"
    assert _sweep(own) >= 1
    shown = poll(api, team.reviewer, f"/knowledge-candidates/{candidate_id}",
                 lambda body: body["review_deadline"] is not None, 30)
    decided = review(api, team.reviewer, shown)
    assert decided.status_code == 200, decided.text
    assert decided.json()["candidate"]["status"] == "APPROVED" and decided.json()["knowledge"]["version"] == 1


def test_a_revision_whose_signal_was_lost_is_caught_up_before_a_decision(
        api: TestClient, team: Team, engine: Engine) -> None:
    """The row is the truth: a revision written while Temporal was unreachable (the API answered 503 after the
    write) still lets the reviewer decide on the revised content."""
    shown = propose(api, team.author, proposal("Drafts are reviewed by finance", key="report.review_policy"))
    asked = review(api, team.reviewer, read(api, team.reviewer, shown["candidate_id"]), "request_changes",
                   reason="name the approver's role")
    assert asked.status_code == 200 and asked.json()["candidate"]["status"] == "CHANGES_REQUESTED"
    with tenant_session(engine, team.tenant) as session:  # the write, without the signal
        revise(session, Author(team.tenant, "alice"), uuid.UUID(shown["candidate_id"]), 1,
               parse_proposal(proposal("Drafts are approved by the finance controller", key="report.review_policy")),
               datetime.now(UTC))
    revised = read(api, team.reviewer, shown["candidate_id"])
    assert revised["status"] == "PENDING_REVIEW" and revised["version"] == 2
    decided = review(api, team.reviewer, revised)
    assert decided.status_code == 200, decided.text
    assert decided.json()["candidate"]["status"] == "APPROVED"


EVERY_FORMAT = {  # zh and en forms of each kind, as people write them (those after the labelled ones need no label)
    "email": ["li.lei@example.com.cn", "ops+pager@example.org", "张三@例子.中国", "wang.wu%40example.com"],
    "phone": ["13912345678", "+86 139-1234-5679", "010-62345678", "+1 (415) 555-0199", "+44 20 7946 0958",
              "139—1234—5670", "139/1234/5671", "139\u200b1234\u200b5672"],
    "id_number": ["11010519491231002X", "078-05-1120", "E12345678", "219 09 9999"],
    "card_number": ["6222 0212 3456 7890 128", "4111-1111-1111-1111", "5500 0000 0000 0001"],
    "api_key": ["sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2", "AKIAIOSFODNN7EXAMPLE", "ghp_0123456789abcdefghijABCDEFGHIJ012345",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLWhlcmU", "hunter2-Passw0rd",
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
}


def _unlabelled(kind: str, labelled: int) -> str:
    """The kind's formats after the first ``labelled`` (which a sentence names), one after another."""
    return "、".join(EVERY_FORMAT[kind][labelled:])


def _digits_or_text(value: str) -> list[str]:
    """How a value could survive: as written, and (for numbers) its digits alone."""
    digits = "".join(ch for ch in value if ch.isdigit())
    return [value, digits] if len(digits) >= 8 and not value.startswith(("sk-", "AKIA", "ghp_", "eyJ")) else [value]


def test_every_format_is_redacted_before_anything_stores_or_records_it(
    api: TestClient, team: Team, own: Settings, engine: Engine
) -> None:
    """Each kind in each place a candidate carries text (claim, evidence, an incident's fields and attempts), then a
    review: no value is left in any column of any of the tenant's tables, nor in the review workflow's history."""
    values = [v for kind in EVERY_FORMAT.values() for v in kind]
    contact = "联系 {} 或 {}，电话 {}、{}、{}、{}、{}".format(*EVERY_FORMAT["email"][:2],
                                                     *EVERY_FORMAT["phone"][:5]) + (
        f"；又 {_unlabelled('email', 2)}、{_unlabelled('phone', 5)}")
    ids = "身份证号码：{}，SSN {}，护照号 {}，卡号 {}，card {}".format(*EVERY_FORMAT["id_number"][:3],
                                                                 *EVERY_FORMAT["card_number"][:2]) + (
        f"；又 {_unlabelled('id_number', 3)}、{_unlabelled('card_number', 2)}")
    secrets = "key {} aws {} token {} jwt {} 数据库密码：{}".format(*EVERY_FORMAT["api_key"][:5]) + (
        f"；又 {_unlabelled('api_key', 5)}")
    incident = {"kind": "incident", "symptom": f"payments fail; {contact}", "root_cause": f"leaked creds: {secrets}",
                "fix": "rotate every key", "verification": f"audit of {ids}",
                "attempts": [{"action": f"called {EVERY_FORMAT['phone'][0]}", "outcome": "failed"},
                             {"action": "rotated the keys", "outcome": "fixed"}]}
    created = propose(api, team.author, proposal(f"{contact}; {ids}; {secrets}", key="payments.incident_2026_11",
                                                 authority="P2", structured=incident,
                                                 evidence=[{"quote": contact}, {"quote": ids}, {"quote": secrets}]))
    assert {r["kind"] for r in created["redactions"]} == set(EVERY_FORMAT)
    decided = review(api, team.reviewer, read(api, team.reviewer, created["candidate_id"]))
    assert decided.status_code == 200, decided.text
    with tenant_session(engine, team.tenant) as session:
        tables = session.execute(text(
            "SELECT DISTINCT table_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND column_name = 'tenant_id'")).scalars().all()
        dump = "\n".join(row for table in tables for row in session.execute(
            text(f'SELECT row_to_json(t)::text FROM "{table}" t')).scalars())  # row-level security: this tenant's
    raw, as_json = _history_bytes(own, workflow_id(team.tenant, created["candidate_id"]))
    assert "payments.incident_2026_11" in dump  # the dump is the one we think
    for value in values:
        for form in _digits_or_text(value):
            assert form not in dump, form
            assert form.encode() not in raw and form not in as_json, form
