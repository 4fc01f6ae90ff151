"""A tenant's publish destinations (issue 26, item 4): their routes, and a monthly report published exactly once to
a tenant archive and to a tenant webhook, including a timeout after the receiver got the POST.

Real API, PostgreSQL, Temporal and worker (on a queue of this module's own, whose operator allow-lists loopback);
the receiver is a STAND-IN for a tenant's service: a real HTTP server on loopback that keeps the receiver contract
of the README (POST stores once per idempotency key, GET /operations/{operation_id} looks one up).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from activities.stores import WebhookDestination
from api.main import create_app
from api.settings import Settings
from memory.db import tenant_session
from memory.tasks.reminders import signature
from tests.conftest import MakeKey, auth
from tests.observability.webhook_standin import serving
from tests.tasks.conftest import Team, approve, publications, start_task, status_is, wait_for
from tests.workers import ThreadWorker

SECRET = "a-long-shared-secret-for-tests"


@dataclass
class Receiver:
    """What the stand-in received: every POST (headers, body) and every lookup's operation id."""

    url: str = ""
    stall_first_post: float = 0.0
    lose_first_post: bool = False  # with the stall: the first POST is dropped, never stored (a lost request)
    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    lookups_signed: list[bool] = field(default_factory=list)  # each lookup's signature (over no body) verified
    stored: dict[str, dict[str, str]] = field(default_factory=dict)  # idempotency key -> the answer
    by_operation: dict[str, str] = field(default_factory=dict)  # operation id -> idempotency key


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    got = Receiver()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            key, operation = self.headers["Idempotency-Key"], self.headers["X-Mnemo-Operation-Id"]
            with lock:
                got.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
                first = len(got.posts) == 1
            if first and got.lose_first_post:
                time.sleep(got.stall_first_post)
                return
            with lock:
                answer = got.stored.setdefault(key, {"publication_id": f"pub-{len(got.stored) + 1}",
                                                     "url": f"https://reports.example/{len(got.stored) + 1}"})
                got.by_operation[operation] = key
            if first and got.stall_first_post:
                time.sleep(got.stall_first_post)  # stored, but the answer comes too late: it is lost
            self._answer(200, answer)

        def do_GET(self) -> None:
            operation = self.path.rsplit("/", 1)[-1]
            with lock:
                got.lookups.append(operation)
                stamp = int(self.headers["X-Mnemo-Timestamp"])
                got.lookups_signed.append(self.headers["X-Mnemo-Signature"] == signature(SECRET, stamp, b""))
                key = got.by_operation.get(operation)
            if key is None:
                self._answer(404)
            else:
                self._answer(200, got.stored[key])

        def log_message(self, format: str, *args: object) -> None:
            return

    with serving(Handler) as base:
        got.url = f"{base}/hooks/publish"
        yield got


@pytest.fixture(scope="module")
def api(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    """An API and its worker whose operator allows loopback webhooks (MNEMO_WEBHOOK_ALLOWED_HOSTS)."""
    own = settings.model_copy(update={"webhook_allowed_hosts": "127.0.0.0/8",
                                      "task_queue": f"destinations-{uuid.uuid4().hex[:8]}"})
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine),
                          webhook_allowed=own.webhook_allow_list()).start()
    try:
        with TestClient(create_app(own)) as client:
            yield client
    finally:
        worker.stop()


@pytest.fixture()
def admin(team: Team, make_key: MakeKey) -> str:
    return make_key(tenant=team.tenant, user="ada", roles=("admin",))


def _put(api: TestClient, key: str, name: str, **body: Any) -> Any:
    return api.put(f"/publish-destinations/{name}", json=body, headers=auth(key))


def _published(api: TestClient, team: Team, destination: str) -> dict[str, Any]:
    """A June report of the owner's, approved, once it has settled."""
    task_id = start_task(api, team.owner, destination=destination)["task_id"]
    view = wait_for(api, team.owner, task_id, status_is("WAITING_FOR_APPROVAL", "FAILED"))
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    assert approve(api, team.approver, view).status_code == 200
    return wait_for(api, team.owner, task_id, status_is("SUCCEEDED", "FAILED", "WAITING_FOR_OPERATOR"))


def _operations(engine: Engine, tenant: str, task_id: str) -> list[tuple[str, int]]:
    with tenant_session(engine, tenant) as session:
        rows = session.execute(text("SELECT status, reconcile_attempts FROM task_operations WHERE task_id = :t "
                                    "ORDER BY created_at"), {"t": task_id})
        return [(str(status), int(attempts)) for status, attempts in rows]


def test_an_admin_puts_reads_and_removes_destinations_and_the_secret_never_comes_back(
    api: TestClient, client: TestClient, team: Team, admin: str, make_key: MakeKey, receiver: Receiver
) -> None:
    created = _put(api, admin, "board", kind="archive")
    assert created.status_code == 201, created.text
    assert created.json() | {"updated_at": None} == {"name": "board", "kind": "archive", "url": None,
                                                     "secret_set": False, "built_in": False, "created_by": "ada",
                                                     "updated_at": None}
    again = _put(api, admin, "board", kind="archive")
    assert again.status_code == 200 and again.json() == created.json()  # nothing changed, not even updated_at

    hook = _put(api, admin, "hook", kind="webhook", url=receiver.url, secret=SECRET)
    assert hook.status_code == 201, hook.text
    assert hook.json()["secret_set"] is True and SECRET not in hook.text
    moved = _put(api, admin, "hook", kind="webhook", url=receiver.url + "/v2", secret=SECRET)
    assert moved.status_code == 200 and moved.json()["url"] == receiver.url + "/v2"

    # Any of the tenant's keys reads them, built-ins first; no secret in any answer.
    listed = api.get("/publish-destinations", headers=auth(team.owner))
    assert listed.status_code == 200 and SECRET not in listed.text
    assert [(d["name"], d["kind"], d["built_in"]) for d in listed.json()["items"]] == [
        ("archive", "archive", True), ("reports", "archive", True), ("board", "archive", False),
        ("hook", "webhook", False)]
    assert api.get("/publish-destinations/hook", headers=auth(team.approver)).json()["url"] == receiver.url + "/v2"
    assert api.get("/publish-destinations/archive", headers=auth(team.owner)).json()["built_in"] is True

    # Another tenant's destination is a missing one.
    stranger = make_key(roles=("admin",))
    assert api.get("/publish-destinations/board", headers=auth(stranger)).status_code == 404
    assert api.delete("/publish-destinations/board", headers=auth(stranger)).status_code == 404

    # Only an admin writes; the refused change nothing.
    for key in (team.owner, team.approver, team.operator):
        refused = _put(api, key, "board", kind="webhook", url=receiver.url, secret=SECRET)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        assert api.delete("/publish-destinations/board", headers=auth(key)).status_code == 403
    assert api.get("/publish-destinations/board", headers=auth(admin)).json()["kind"] == "archive"

    # Bad input: each a typed code saying what to change.
    cases = [("archive", {"kind": "archive"}, 409, "destination_reserved"),
             ("reports-mine", {"kind": "archive"}, 409, "destination_reserved"),
             ("Board", {"kind": "archive"}, 422, "invalid_destination_name"),
             ("x", {"kind": "webhook", "url": receiver.url}, 422, "webhook_fields_missing"),
             ("x", {"kind": "archive", "url": receiver.url}, 422, "archive_fields_unexpected"),
             ("x", {"kind": "ftp"}, 422, None)]
    for name, body, status, code in cases:
        answer = _put(api, admin, name, **body)
        assert answer.status_code == status, (name, body, answer.text)
        assert code is None or answer.json()["error"]["code"] == code, answer.text
    assert api.delete("/publish-destinations/archive", headers=auth(admin)).json()["error"]["code"] == (
        "destination_reserved")

    # A loopback receiver is refused where the operator did not allow it, with the tenant webhook's code.
    refused = _put(client, admin, "hook2", kind="webhook", url=receiver.url, secret=SECRET)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "webhook_address_not_public"
    assert "MNEMO_WEBHOOK_ALLOWED_HOSTS" in refused.json()["error"]["message"]
    assert client.get("/publish-destinations/hook2", headers=auth(admin)).status_code == 404

    assert api.delete("/publish-destinations/hook", headers=auth(admin)).status_code == 204
    assert api.get("/publish-destinations/hook", headers=auth(admin)).status_code == 404
    assert api.delete("/publish-destinations/hook", headers=auth(admin)).status_code == 404


def test_a_report_published_to_a_tenant_archive_is_served_to_whoever_may_read_the_task(
    api: TestClient, team: Team, admin: str, make_key: MakeKey, settings: Settings, engine: Engine
) -> None:
    # Any name a destination may have is one POST /tasks takes (an underscore too).
    assert _put(api, admin, "team_board", kind="archive").status_code == 201
    task_id = start_task(api, team.owner, destination="team_board")["task_id"]
    view = wait_for(api, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    in_use = api.delete("/publish-destinations/team_board", headers=auth(admin))
    assert in_use.status_code == 409 and in_use.json()["error"]["code"] == "destination_in_use", in_use.text
    assert task_id in in_use.json()["error"]["details"]["task_ids"]
    assert approve(api, team.approver, view).status_code == 200
    done = wait_for(api, team.owner, task_id, status_is("SUCCEEDED", "FAILED", "WAITING_FOR_OPERATOR"))
    assert done["status"] == "SUCCEEDED", done

    listed = api.get(f"/tasks/{task_id}/publications", headers=auth(team.owner))
    assert listed.status_code == 200, listed.text
    [item] = listed.json()["items"]
    sha = view["pending_approval"]["artifact_sha256"]
    assert item == {"publication_id": done["publications"][0]["publication_id"], "destination": "team_board",
                    "artifact_sha256": sha, "url": f"/tasks/{task_id}/artifacts/{sha}"}
    for reader in (team.owner, team.approver):
        served = api.get(item["url"], headers=auth(reader))
        assert served.status_code == 200 and hashlib.sha256(served.content).hexdigest() == sha
    stranger = make_key(roles=("admin",))
    assert api.get(item["url"], headers=auth(stranger)).status_code == 404
    assert api.get(f"/tasks/{task_id}/publications", headers=auth(stranger)).status_code == 404
    assert api.get(f"/tasks/{task_id}/publications", headers=auth(team.other_user)).status_code == 404
    # Exactly once, in the tenant's own archive; once the task is done the destination may go.
    assert len(publications(settings, engine, f"{team.tenant}/team_board")) == 1
    assert api.delete("/publish-destinations/team_board", headers=auth(admin)).status_code == 204


def _check_delivery(post: tuple[dict[str, str], bytes], task_id: str, sha: str) -> dict[str, Any]:
    headers, body = post
    assert headers["x-mnemo-signature"] == signature(SECRET, int(headers["x-mnemo-timestamp"]), body)
    assert abs(time.time() - int(headers["x-mnemo-timestamp"])) < 120
    sent = json.loads(body)
    assert headers["idempotency-key"] == sent["idempotency_key"] == f"publish:{task_id}:{sha}:hook"
    assert headers["x-mnemo-operation-id"] == sent["operation_id"] and headers["x-mnemo-event"] == "publication"
    assert (sent["task_id"], sent["artifact_sha256"]) == (task_id, sha)
    assert {f["name"] for f in sent["files"]} == {"report.html", "report.md", "draft.json"}
    return dict(sent)


def test_a_report_published_to_a_tenant_webhook_arrives_once_signed(
    api: TestClient, team: Team, admin: str, receiver: Receiver, engine: Engine
) -> None:
    assert _put(api, admin, "hook", kind="webhook", url=receiver.url, secret=SECRET).status_code == 201
    done = _published(api, team, "hook")
    assert done["status"] == "SUCCEEDED", done
    sha = done["draft_sha256"]
    [post] = receiver.posts
    _check_delivery(post, done["task_id"], sha)
    assert receiver.lookups == []
    assert _operations(engine, team.tenant, done["task_id"]) == [("SUCCEEDED", 0)]
    listed = api.get(f"/tasks/{done['task_id']}/publications", headers=auth(team.approver)).json()
    assert listed == {"items": [{"publication_id": "pub-1", "destination": "hook", "artifact_sha256": sha,
                                 "url": "https://reports.example/1"}]}


def test_a_timeout_after_the_receiver_got_the_post_is_reconciled_through_its_lookup_never_resent(
    api: TestClient, team: Team, admin: str, receiver: Receiver, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WebhookDestination, "timeout_seconds", 1.0)
    receiver.stall_first_post = 3.0
    assert _put(api, admin, "hook", kind="webhook", url=receiver.url, secret=SECRET).status_code == 201
    done = _published(api, team, "hook")
    assert done["status"] == "SUCCEEDED", done
    [post] = receiver.posts  # one delivery: the unknown outcome was asked about, not sent again
    sent = _check_delivery(post, done["task_id"], done["draft_sha256"])
    assert receiver.lookups == [sent["operation_id"]] and receiver.lookups_signed == [True]
    assert _operations(engine, team.tenant, done["task_id"]) == [("SUCCEEDED", 1)]
    timeline = api.get(f"/tasks/{done['task_id']}/timeline", headers=auth(team.owner)).json()["entries"]
    assert [e["reason"] for e in timeline if e["kind"] == "checkpoint"][-2:] == ["unknown_outcome", "published"]
    [item] = api.get(f"/tasks/{done['task_id']}/publications", headers=auth(team.owner)).json()["items"]
    assert (item["publication_id"], item["url"]) == ("pub-1", "https://reports.example/1")


def test_a_post_the_receiver_never_stored_is_found_absent_and_sent_again_under_the_same_key(
    api: TestClient, team: Team, admin: str, receiver: Receiver, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WebhookDestination, "timeout_seconds", 1.0)
    receiver.stall_first_post, receiver.lose_first_post = 3.0, True
    assert _put(api, admin, "hook", kind="webhook", url=receiver.url, secret=SECRET).status_code == 201
    done = _published(api, team, "hook")
    assert done["status"] == "SUCCEEDED", done
    first, second = (_check_delivery(post, done["task_id"], done["draft_sha256"]) for post in receiver.posts)
    assert receiver.lookups == [first["operation_id"]]  # asked first; 404: definitely not there
    assert first["operation_id"] != second["operation_id"] and len(receiver.stored) == 1
    assert _operations(engine, team.tenant, done["task_id"]) == [("FAILED", 1), ("SUCCEEDED", 0)]


def test_the_address_is_judged_again_at_delivery_and_nothing_is_sent_where_it_is_no_longer_allowed(
    api: TestClient, client: TestClient, task_worker: ThreadWorker, team: Team, admin: str, receiver: Receiver
) -> None:
    """Set where loopback was allowed, delivered by a worker whose operator does not allow it (as after DNS
    rebinding, or the allow-list shrinking): refused at the send, with the guard's code, and nothing sent."""
    assert _put(api, admin, "hook", kind="webhook", url=receiver.url, secret=SECRET).status_code == 201
    done = _published(client, team, "hook")  # the API and worker of the default settings: no allow-list
    assert done["status"] == "FAILED" and done["error"]["code"] == "webhook_address_not_public", done
    assert receiver.posts == [] and receiver.lookups == []
