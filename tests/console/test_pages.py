"""Console pages without a browser: the session's cookie and its end, operator actions behind their
confirmation, my memory, deletion jobs and error pages (real API, worker, Temporal and PostgreSQL)."""

from __future__ import annotations

import re
import uuid

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from api.cli.task import task_app
from memory.db import global_session
from tests.conftest import MakeKey, auth
from tests.console.conftest import Team, form_token, start_task, wait_task, waiting_for_approval


def source(source_id: str) -> dict[str, str]:
    return {"source_id": source_id, "source_type": "EXPLICIT_USER_STATEMENT", "captured_at": "2026-06-01T09:00:00Z"}


def signed_in(client: TestClient, key: str) -> str:
    """Sign ``client`` in with ``key``; the session's CSRF token."""
    client.cookies.clear()
    form = client.get("/console/login")
    response = client.post("/console/login", data={"api_key": key, "csrf_token": form_token(form.text)})
    assert response.status_code == 200 and response.url.path == "/console/", response.text
    return form_token(response.text)


def test_the_cookie_is_httponly_strict_and_secure_and_a_bad_key_is_told_why(
    https_client: TestClient, make_key: MakeKey
) -> None:
    https_client.cookies.clear()
    token = form_token(https_client.get("/console/login").text)
    refused = https_client.post("/console/login", data={"api_key": "mnemo_nope", "csrf_token": token})
    assert refused.status_code == 401
    assert "the API key is malformed" in refused.text and "Sign in again with a valid API key" in refused.text
    opened = https_client.post("/console/login", data={"api_key": make_key(), "csrf_token": token},
                               follow_redirects=False)
    assert opened.status_code == 303
    cookie = opened.headers["set-cookie"].lower()
    assert cookie.startswith("__host-mnemo_console=") and "httponly" in cookie and "samesite=strict" in cookie
    assert "secure" in cookie and "path=/;" in cookie  # __Host-: only this origin, over HTTPS, can set it


def test_a_public_clients_key_does_not_sign_in(https_client: TestClient, make_key: MakeKey) -> None:
    https_client.cookies.clear()
    token = form_token(https_client.get("/console/login").text)
    refused = https_client.post("/console/login", data={"api_key": make_key(roles=("public_client", "approver")),
                                                        "csrf_token": token})
    assert refused.status_code == 403 and "reads the public resource catalog only" in refused.text
    assert "__Host-mnemo_console" not in https_client.cookies


def test_a_sign_in_without_the_forms_token_is_refused(https_client: TestClient, make_key: MakeKey) -> None:
    https_client.cookies.clear()
    https_client.get("/console/login")
    refused = https_client.post("/console/login", data={"api_key": make_key(), "csrf_token": "forged"})
    assert refused.status_code == 403 and "csrf_failed" in refused.text
    assert "__Host-mnemo_console" not in https_client.cookies


def test_a_session_unused_for_the_idle_timeout_ends(
    https_client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    signed_in(https_client, make_key())
    assert https_client.get("/console/tasks").url.path == "/console/tasks"
    with global_session(engine) as session:
        session.execute(text("UPDATE console_sessions SET last_seen_at = last_seen_at - interval '31 minutes'"))
    ended = https_client.get("/console/tasks")
    assert ended.url.path == "/console/login" and "30 minutes without use" in ended.text
    assert https_client.get("/console/tasks").url.path == "/console/login"  # deleted, not only refused once


def test_an_operator_cancels_a_task_through_a_confirmation_step(https_client: TestClient, team: Team) -> None:
    task_id = start_task(https_client, team.owner)
    wait_task(https_client, team.owner, task_id, waiting_for_approval)
    token = signed_in(https_client, team.operator)
    listed = https_client.get("/console/tasks", params={"status": "WAITING_FOR_APPROVAL"})
    assert f"/console/tasks/{task_id}" in listed.text
    assert task_id not in https_client.get("/console/tasks", params={"waiting_reason": "operator"}).text
    detail = https_client.get(f"/console/tasks/{task_id}")
    assert f'href="/console/tasks/{task_id}/confirm?action=cancel"' in detail.text
    workflow = f"task-{team.tenant}-{task_id}"
    assert re.search(rf'href="http://127\.0\.0\.1:8233/namespaces/mnemo/workflows/{workflow}/', detail.text)
    assert 'id="approve"' not in detail.text  # an operator is not an approver
    confirm = https_client.get(f"/console/tasks/{task_id}/confirm", params={"action": "cancel"})
    assert "cannot be undone" in confirm.text
    assert wait_task(https_client, team.owner, task_id, waiting_for_approval)  # looking changes nothing
    done = https_client.post(f"/console/tasks/{task_id}/control",
                             data={"csrf_token": token, "action": "cancel", "reason": "wrong month"})
    assert done.status_code == 200 and "Done: cancel" in done.text
    assert wait_task(https_client, team.owner, task_id, lambda v: v["status"] == "CANCELLED")


def test_another_users_task_is_the_pages_404_and_the_error_says_what_to_do(
    https_client: TestClient, team: Team, make_key: MakeKey
) -> None:
    task_id = start_task(https_client, team.owner)
    signed_in(https_client, make_key(tenant=team.tenant, user="carol"))
    for path in (f"/console/tasks/{task_id}", f"/console/tasks/{uuid.uuid4()}"):
        missing = https_client.get(path)
        assert missing.status_code == 404
        assert "does not exist" in missing.text and "Check the link" in missing.text
    assert https_client.get("/console/approvals").status_code == 403


def test_my_memory_shows_why_it_was_used_and_takes_a_correction_an_expiry_and_a_deletion(
    https_client: TestClient, make_key: MakeKey
) -> None:
    key = make_key(roles=("memory_writer",))
    created = https_client.post("/memory-candidates", headers=auth(key), json={
        "category": "PROFILE", "space": "USER", "content": "我住在上海", "source_level": "E2",
        "source": source("chat-1"),
    })
    assert created.status_code == 201, created.text
    memory_id = created.json()["memory_id"]
    recalled = https_client.post("/memory-query", headers=auth(key), json={"query": "上海", "retrieval": "lexical"})
    assert recalled.status_code == 200 and recalled.json()["items"], recalled.text
    token = signed_in(https_client, key)

    mine = https_client.get("/console/memory")
    assert "PROFILE" in mine.text and f"/console/memory/{memory_id}" in mine.text
    detail = https_client.get(f"/console/memory/{memory_id}")
    assert "我住在上海" in detail.text and "EXPLICIT_USER_STATEMENT" in detail.text
    assert recalled.json()["trace_id"][:12] in detail.text  # why was this used: that recall's audit

    corrected = https_client.post(f"/console/memory/{memory_id}/correct",
                                  data={"csrf_token": token, "expected_version": "1", "content": "我住在杭州"})
    assert corrected.status_code == 200 and "corrected to version 2" in corrected.text
    assert "我住在杭州" in corrected.text
    stale = https_client.post(f"/console/memory/{memory_id}/correct",
                              data={"csrf_token": token, "expected_version": "1", "content": "again"})
    assert stale.status_code == 409 and "Reload the page" in stale.text
    old = https_client.get(f"/console/memory/{memory_id}", params={"version": 1})
    assert "我住在上海" in old.text and "SUPERSEDED" in old.text

    expired = https_client.post(f"/console/memory/{memory_id}/expire", data={"csrf_token": token})
    assert expired.status_code == 200 and "EXPIRED" in expired.text

    deleted = https_client.post(f"/console/memory/{memory_id}/delete", data={"csrf_token": token})
    assert deleted.status_code == 200 and deleted.url.path.startswith("/console/deletions/")
    assert "Layers" in deleted.text and "Remaining copies" in deleted.text
    assert deleted.url.path in https_client.get("/console/deletions").text
    assert https_client.get(f"/console/memory/{memory_id}").status_code == 404


def test_a_user_without_memory_writer_sees_no_correction_form(https_client: TestClient, make_key: MakeKey) -> None:
    key = make_key(roles=())
    created = https_client.post("/memory-candidates", headers=auth(key), json={
        "category": "PROFILE", "space": "USER", "content": "I live in Lyon", "source_level": "E2",
        "source": source("chat-2"),
    })
    assert created.status_code == 201, created.text
    token = signed_in(https_client, key)
    detail = https_client.get(f"/console/memory/{created.json()['memory_id']}")
    assert "Correct it" not in detail.text and "Expire" not in detail.text and "Forget it" in detail.text
    refused = https_client.post(f"/console/memory/{created.json()['memory_id']}/correct",
                                data={"csrf_token": token, "expected_version": "1", "content": "Paris"})
    assert refused.status_code == 403 and "needs the memory_writer role" in refused.text


def test_mnemo_task_show_prints_the_published_reports_url_and_it_opens_in_the_console(
    base_url: str, team: Team
) -> None:
    with httpx.Client(base_url=base_url, timeout=30, follow_redirects=True) as api:
        task_id = start_task(api, team.owner)
        view = wait_task(api, team.owner, task_id, waiting_for_approval)
        approved = api.post(f"/tasks/{task_id}/approvals", headers=auth(team.approver), json={
            "decision": "approve", "artifact_sha256": view["pending_approval"]["artifact_sha256"],
            "state_version": view["state_version"],
        })
        assert approved.status_code == 200, approved.text
        wait_task(api, team.owner, task_id, lambda v: v["status"] == "SUCCEEDED")
        shown = CliRunner().invoke(task_app, ["show", task_id, "--api-url", base_url, "--key", team.owner])
        assert shown.exit_code == 0, shown.output
        url = f"{base_url}/console/tasks/{task_id}/report"
        assert f"published report  {url}" in shown.output

        opened = api.get(url)
        assert opened.url.path == "/console/login"  # a person signs in first, then lands on the report
        token = form_token(opened.text)
        report = api.post("/console/login", data={"api_key": team.owner, "csrf_token": token,
                                                  "next": f"/console/tasks/{task_id}/report"})
        assert report.status_code == 200 and report.url == url
        assert "<h1>Monthly sales report 2026-06 (CNY)</h1>" in report.text
        assert report.headers["content-security-policy"].startswith("default-src 'none'")


def test_approve_is_offered_only_to_who_may_decide_and_the_others_are_told_why(
    https_client: TestClient, team: Team, make_key: MakeKey
) -> None:
    """The owner holding the approver role (the demo's admin) is refused by separation of duties: the page says so
    instead of offering a button that answers 403 (issue 24, item 2)."""
    task_id = start_task(https_client, team.owner)
    wait_task(https_client, team.owner, task_id, waiting_for_approval)
    owner_approver = make_key(tenant=team.tenant, user="alice", roles=("approver", "memory_writer"))
    for key, offered, why in (
        (owner_approver, False, "you own this task, so another approver must decide on its draft"),
        (team.operator, False, "approving or rejecting a draft needs the approver role"),
        (team.approver, True, None),
    ):
        signed_in(https_client, key)
        detail = https_client.get(f"/console/tasks/{task_id}").text
        assert ('id="approve"' in detail) is offered
        assert ('id="why-not-decide"' in detail) is not offered
        if why is not None:
            assert why in detail
