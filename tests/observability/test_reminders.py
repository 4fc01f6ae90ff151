"""Approval reminders reach the tenant's webhook: HMAC-signed, retried by Temporal with the same idempotency key;
the webhook's secret is stored and never returned. Real worker, real Temporal dev server, a stand-in receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from memory.tasks.keys import task_id_for, workflow_id
from tests.conftest import MakeKey, auth
from tests.observability.webhook_standin import Receiver, webhook_receiver
from tests.tasks.conftest import report_input, small_tenant
from tests.workers import ThreadWorker
from workflows.report_task import ApprovalPolicy, ReportTaskWorkflow

SECRET = "a-long-shared-secret-for-tests"


def test_the_webhook_secret_goes_in_and_never_comes_out(client: TestClient, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    admin, writer = make_key(tenant=tenant, roles=("admin",)), make_key(tenant=tenant, user="bob")
    body = {"url": "https://8.8.8.8/mnemo", "secret": SECRET}  # public: accepted (tests/.../test_webhook_addresses)
    assert client.put("/tenant-webhook", json=body, headers=auth(writer)).status_code == 403
    put = client.put("/tenant-webhook", json=body, headers=auth(admin))
    assert put.status_code == 200, put.text
    read = client.get("/tenant-webhook", headers=auth(admin))
    assert read.json()["url"] == body["url"] and read.json()["secret_set"] is True
    assert SECRET not in put.text + read.text
    assert client.get("/tenant-webhook", headers=auth(writer)).status_code == 403
    short = client.put("/tenant-webhook", json={**body, "secret": "short"}, headers=auth(admin))
    assert short.status_code == 422
    for url in ("ftp://8.8.8.8/x", "https://user:pw@8.8.8.8/x", "/relative", "http://[::1",
                "https://8.8.8.8:99999/x", " https://8.8.8.8/x"):
        refused = client.put("/tenant-webhook", json={**body, "url": url}, headers=auth(admin))
        assert refused.status_code == 422, (url, refused.text)
    assert client.delete("/tenant-webhook", headers=auth(admin)).status_code == 204
    assert client.get("/tenant-webhook", headers=auth(admin)).status_code == 404


def wait_for_deliveries(receiver: Receiver, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(receiver.deliveries) < count:
        assert time.monotonic() < deadline, f"{len(receiver.deliveries)} deliveries, expected {count}"
        time.sleep(0.1)


async def test_a_reminder_is_signed_and_its_retry_carries_the_same_key(
    client: TestClient, make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    tenant = small_tenant(make_key, engine)
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    queue = f"reminders-{uuid.uuid4().hex[:8]}"
    # The stand-in listens on loopback, which only an operator's allow-list opens (API and worker alike).
    own = settings.model_copy(update={"task_queue": queue, "webhook_allowed_hosts": "127.0.0.1"})
    with webhook_receiver(503) as receiver, TestClient(create_app(own)) as allowing:  # the first delivery fails
        refused = client.put("/tenant-webhook", json={"url": receiver.url, "secret": SECRET}, headers=auth(admin))
        assert refused.json()["error"]["code"] == "webhook_address_not_public", refused.text
        put = allowing.put("/tenant-webhook", json={"url": receiver.url, "secret": SECRET}, headers=auth(admin))
        assert put.status_code == 200, put.text
        worker = ThreadWorker(own, engine, queue, artifacts=own.artifact_root(engine),
                              webhook_allowed=own.webhook_allow_list()).start()
        temporal = await connect(own)
        task_id = task_id_for(tenant, "alice", "reminded")
        handle = await temporal.start_workflow(
            ReportTaskWorkflow.run,
            report_input(tenant, task_id, "reminded",
                         approval=ApprovalPolicy(deadline_seconds=600, reminder_every_seconds=2)),
            id=workflow_id(tenant, task_id), task_queue=queue,
        )
        try:
            wait_for_deliveries(receiver, 2)
        finally:
            await handle.terminate("test over")
            worker.stop()
    first, retry = receiver.deliveries[:2]
    assert first.body == retry.body
    assert first.headers["idempotency-key"] == retry.headers["idempotency-key"]
    message = json.loads(first.body)
    assert first.headers["idempotency-key"] == f"approval-reminder:{message['approval_id']}:1"
    assert (message["type"], message["task_id"], message["reminder_number"]) == ("approval_reminder", task_id, 1)
    assert set(message) == {"type", "tenant_id", "task_id", "approval_id", "approval_type", "reminder_number",
                            "requested_at", "deadline_at", "artifact_sha256"}  # no draft text
    for delivery in (first, retry):
        stamp = delivery.headers["x-mnemo-timestamp"]
        expected = hmac.new(SECRET.encode(), f"{stamp}.".encode() + delivery.body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(delivery.headers["x-mnemo-signature"], f"sha256={expected}")
        assert abs(int(stamp) - time.time()) < 300
    forged = hmac.new(b"another-secret-entirely", f"{stamp}.".encode() + first.body, hashlib.sha256).hexdigest()
    assert first.headers["x-mnemo-signature"] != f"sha256={forged}"
