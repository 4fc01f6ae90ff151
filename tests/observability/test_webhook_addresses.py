"""The tenant webhook reaches public addresses only (issue 23, finding 8: it was a blind SSRF), judged at set time
and again at delivery, connecting to the address it checked; the operator's allow-list opens more.

Real API, real PostgreSQL, real Temporal and worker, the real system resolver; a loopback stand-in receiver.
"""

from __future__ import annotations

import asyncio
import ipaddress
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from activities.pinned import send_pinned
from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from memory.db import global_session, tenant_session
from memory.egress import AddressNotPublic, AllowList, HostUnresolvable, checked_target, public
from memory.identity.auth import authenticate
from memory.tasks.keys import task_id_for, workflow_id
from memory.tasks.reminders import set_webhook
from tests.conftest import MakeKey, auth
from tests.observability.webhook_standin import webhook_receiver
from tests.tasks.conftest import report_input, small_tenant
from tests.workers import ThreadWorker
from workflows.report_task import ApprovalPolicy, ReportTaskWorkflow

SECRET = "a-long-shared-secret-for-tests"
NOT_PUBLIC = {"webhook_address_not_public"}
NOT_PUBLIC_OR_UNRESOLVED = {"webhook_address_not_public", "webhook_host_unresolvable"}  # no DNS needed to refuse

HOSTILE = [
    # loopback, in every form getaddrinfo (inet_aton) reads
    ("http://127.0.0.1/hook", NOT_PUBLIC),
    ("http://127.0.0.1:8000/hook", NOT_PUBLIC),
    ("http://127.1/hook", NOT_PUBLIC),
    ("http://127.0.1/hook", NOT_PUBLIC),
    ("http://0x7f.1/hook", NOT_PUBLIC),
    ("http://0x7f000001/hook", NOT_PUBLIC),
    ("http://2130706433/hook", NOT_PUBLIC),
    ("http://017700000001/hook", NOT_PUBLIC),
    ("http://0177.0.0.1/hook", NOT_PUBLIC),
    ("http://0x7F.0x00.0x00.0x01/hook", NOT_PUBLIC),
    # host names that resolve to loopback
    ("http://localhost/hook", NOT_PUBLIC),
    ("http://localhost./hook", NOT_PUBLIC),
    ("http://%6c%6fcalhost/hook", NOT_PUBLIC),
    ("http://LOCALHOST:9000/hook", NOT_PUBLIC),
    ("http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/hook", NOT_PUBLIC),  # fullwidth: IDNA folds it
    # this network, private, shared, link-local and the metadata endpoint
    ("http://0/hook", NOT_PUBLIC),
    ("http://0.0.0.0:8000/hook", NOT_PUBLIC),
    ("http://10.0.0.1/hook", NOT_PUBLIC),
    ("http://172.16.5.4/hook", NOT_PUBLIC),
    ("http://172.31.255.255/hook", NOT_PUBLIC),
    ("http://192.168.1.1/hook", NOT_PUBLIC),
    ("http://100.64.0.1/hook", NOT_PUBLIC),
    ("http://169.254.169.254/latest/meta-data/", NOT_PUBLIC),
    ("http://2852039166/latest/meta-data/", NOT_PUBLIC),  # 169.254.169.254 as one number
    ("http://metadata.google.internal/computeMetadata/v1/", NOT_PUBLIC_OR_UNRESOLVED),
    ("http://metadata/computeMetadata/v1/", NOT_PUBLIC_OR_UNRESOLVED),
    ("http://127.0.0.1.nip.io/hook", NOT_PUBLIC_OR_UNRESOLVED),
    # multicast, reserved, broadcast, documentation
    ("http://224.0.0.1/hook", NOT_PUBLIC),
    ("http://240.0.0.1/hook", NOT_PUBLIC),
    ("http://255.255.255.255/hook", NOT_PUBLIC),
    ("http://192.0.2.10/hook", NOT_PUBLIC),
    # IPv6: loopback, unspecified, mapped, link-local (with a zone), unique local, 6to4 and NAT64 of private ones
    ("http://[::1]/hook", NOT_PUBLIC),
    ("http://[::1]:8080/hook", NOT_PUBLIC),
    ("http://[::]/hook", NOT_PUBLIC),
    ("http://[::ffff:127.0.0.1]/hook", NOT_PUBLIC),
    ("http://[::ffff:7f00:1]/hook", NOT_PUBLIC),
    ("http://[::ffff:169.254.169.254]/hook", NOT_PUBLIC),
    ("http://[fe80::1]/hook", NOT_PUBLIC),
    ("http://[fe80::1%25lo]/hook", NOT_PUBLIC),
    ("http://[fc00::1]/hook", NOT_PUBLIC),
    ("http://[fd12:3456::1]/hook", NOT_PUBLIC),
    ("http://[2002:7f00:1::]/hook", NOT_PUBLIC),
    ("http://[2002:a9fe:a9fe::]/hook", NOT_PUBLIC),
    ("http://[64:ff9b::a9fe:a9fe]/hook", NOT_PUBLIC),
    ("http://[64:ff9b::7f00:1]/hook", NOT_PUBLIC),
    ("http://[ff02::1]/hook", NOT_PUBLIC),
]
MALFORMED = [  # refused before any address is looked at
    "gopher://127.0.0.1/hook", "file:///etc/passwd", "https://user:pw@8.8.8.8/hook", "http://8.8.8.8@127.0.0.1/",
    "//127.0.0.1/hook", "http://[::1", "https://8.8.8.8:99999/hook",
]


@pytest.fixture(scope="module")
def allowing(settings: Settings) -> Iterator[TestClient]:
    """An API whose operator allows the loopback stand-in (by network) and one internal name."""
    own = settings.model_copy(update={"webhook_allowed_hosts": "127.0.0.0/8, hooks.internal, ::1"})
    with TestClient(create_app(own)) as client:
        yield client


def test_every_non_public_address_is_refused_at_set_time_with_its_code(client: TestClient, make_key: MakeKey) -> None:
    admin = make_key(roles=("admin",))
    assert len(HOSTILE) >= 25
    for url, codes in HOSTILE:
        refused = client.put("/tenant-webhook", json={"url": url, "secret": SECRET}, headers=auth(admin))
        assert refused.status_code == 422, (url, refused.text)
        error = refused.json()["error"]
        assert error["code"] in codes, (url, error)
        assert "MNEMO_WEBHOOK_ALLOWED_HOSTS" in error["message"] or "does not resolve" in error["message"], error
    for url in MALFORMED:
        refused = client.put("/tenant-webhook", json={"url": url, "secret": SECRET}, headers=auth(admin))
        assert refused.status_code == 422, (url, refused.text)
    assert client.get("/tenant-webhook", headers=auth(admin)).status_code == 404  # nothing was stored


def test_a_public_address_is_accepted_and_the_allow_list_opens_what_it_names(
    client: TestClient, allowing: TestClient, make_key: MakeKey
) -> None:
    admin = make_key(roles=("admin",))
    for url in ("https://8.8.8.8/hook", "https://[2606:4700:4700::1111]:8443/hook"):
        put = client.put("/tenant-webhook", json={"url": url, "secret": SECRET}, headers=auth(admin))
        assert put.status_code == 200, (url, put.text)
    for url in ("http://127.0.0.1:9000/hook", "http://localhost/hook", "http://[::1]/hook", "http://0x7f.1/hook"):
        assert client.put("/tenant-webhook", json={"url": url, "secret": SECRET},
                          headers=auth(admin)).status_code == 422, url
        put = allowing.put("/tenant-webhook", json={"url": url, "secret": SECRET}, headers=auth(admin))
        assert put.status_code == 200, (url, put.text)
    for url in ("http://10.0.0.1/hook", "http://169.254.169.254/", "http://[fe80::1]/"):  # not named: still refused
        refused = allowing.put("/tenant-webhook", json={"url": url, "secret": SECRET}, headers=auth(admin))
        assert refused.json()["error"]["code"] == "webhook_address_not_public", url


def test_a_malformed_allow_list_stops_the_process_at_start() -> None:
    with pytest.raises(ValueError, match="MNEMO_WEBHOOK_ALLOWED_HOSTS"):
        Settings(webhook_allowed_hosts="hooks.internal, not a host!")
    assert AllowList.parse("") == AllowList()


# --- the class, not the examples: every textual form of every non-public IPv4 address ------------------------

NON_PUBLIC_V4 = [ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "224.0.0.0/4", "240.0.0.0/4",
)]  # IANA's IPv4 special-purpose registry (not globally reachable), written out independently of memory.egress


@st.composite
def non_public_v4(draw: st.DrawFn) -> ipaddress.IPv4Address:
    network = draw(st.sampled_from(NON_PUBLIC_V4))
    return network[draw(st.integers(0, network.num_addresses - 1))]


def spellings(address: ipaddress.IPv4Address, form: int) -> str:
    """The forms inet_aton (and so getaddrinfo, and so an HTTP client) reads as ``address``."""
    a, b, c, d = address.packed
    high, low = int(address) >> 16, int(address) & 0xFFFF
    return [
        str(address), str(int(address)), hex(int(address)), f"0{int(address):o}",
        f"{a}.{(b << 16) | (c << 8) | d}", f"{a}.{b}.{(c << 8) | d}", f"{hex(a)}.{hex(b)}.{hex(c)}.{hex(d)}",
        f"0{a:o}.0{b:o}.0{c:o}.0{d:o}", f"[::ffff:{address}]", f"[::ffff:{high:x}:{low:x}]",
        f"[2002:{high:x}:{low:x}::1]", f"[64:ff9b::{address}]",
    ][form]


@settings(max_examples=300, deadline=None)
@given(address=non_public_v4(), form=st.integers(0, 11), port=st.one_of(st.none(), st.integers(1, 65535)))
def test_no_spelling_of_a_non_public_ipv4_address_passes(address: ipaddress.IPv4Address, form: int,
                                                         port: int | None) -> None:
    url = f"http://{spellings(address, form)}{f':{port}' if port else ''}/hook"
    with pytest.raises((AddressNotPublic, HostUnresolvable)):
        checked_target(url, AllowList())


@settings(max_examples=200, deadline=None)
@given(address=st.ip_addresses())
def test_an_address_passes_only_when_public_and_the_request_goes_to_it(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    literal = f"[{address}]" if address.version == 6 else str(address)
    if not public(address):
        with pytest.raises(AddressNotPublic):
            checked_target(f"https://{literal}/hook", AllowList())
        return
    target = checked_target(f"https://{literal}/hook", AllowList())
    assert target.addresses == (address,) and target.pinned_url(address) == f"https://{literal}:443/hook"
    assert not any(address in n for n in NON_PUBLIC_V4 if address.version == 4)


def test_a_delivery_connects_to_the_checked_address_under_the_hosts_name() -> None:
    target = checked_target("https://hooks.internal:8443/in?x=1#frag", AllowList.parse("hooks.internal"),
                            resolve=lambda host, port: ["10.1.2.3"])
    assert target.pinned_url(target.addresses[0]) == "https://10.1.2.3:8443/in?x=1"
    assert target.host_header() == "hooks.internal:8443"
    with pytest.raises(AddressNotPublic):  # one private answer among public ones refuses the name
        checked_target("https://hooks.example/in", AllowList(), resolve=lambda host, port: ["8.8.8.8", "10.0.0.1"])


def test_the_request_goes_to_the_checked_address_and_carries_the_hosts_name() -> None:
    """The real delivery code against the loopback stand-in: named by the operator, reached at the address checked."""
    with webhook_receiver() as receiver:
        port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
        target = checked_target(f"http://LocalHost:{port}/hooks/mnemo?tenant=a", AllowList.parse("localhost"))
        loopback = ipaddress.ip_address("127.0.0.1")
        assert target.pinned_url(loopback) == f"http://127.0.0.1:{port}/hooks/mnemo?tenant=a"
        response = send_pinned(target, "POST", b'{"ok":true}', {"Content-Type": "application/json"})
    assert response.status_code == 200
    (delivery,) = receiver.deliveries
    assert delivery.headers["host"] == f"localhost:{port}" and delivery.body == b'{"ok":true}'


# --- DNS rebinding: public when set, private at delivery -----------------------------------------------------


async def test_a_name_that_resolves_to_a_private_address_at_delivery_is_refused_and_nothing_is_sent(
    make_key: MakeKey, engine: Engine, settings: Settings
) -> None:
    """Set while ``localhost`` (for the test: a resolver answering a public address) looked public; at delivery the
    worker's real resolver says 127.0.0.1, so the reminder is refused (non-retryable) and never reaches it."""
    tenant = small_tenant(make_key, engine)
    admin = make_key(tenant=tenant, user="root", roles=("admin",))
    queue = f"rebind-{uuid.uuid4().hex[:8]}"
    own = settings.model_copy(update={"task_queue": queue})
    with webhook_receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        with global_session(engine) as session:
            principal = authenticate(session, admin)
        with tenant_session(engine, tenant) as session:
            set_webhook(session, principal, url, SECRET, AllowList(), resolve=lambda host, port: ["93.184.215.14"])
        worker = ThreadWorker(own, engine, queue, artifacts=own.artifact_root(engine)).start()  # allow-list empty
        temporal = await connect(own)
        task_id = task_id_for(tenant, "alice", "rebound")
        handle = await temporal.start_workflow(
            ReportTaskWorkflow.run,
            report_input(tenant, task_id, "rebound",
                         approval=ApprovalPolicy(deadline_seconds=600, reminder_every_seconds=2)),
            id=workflow_id(tenant, task_id), task_queue=queue,
        )
        failures: list[str] = []
        try:
            for _ in range(120):
                history = await handle.fetch_history()
                failures = [
                    event.activity_task_failed_event_attributes.failure.application_failure_info.type
                    for event in history.events if event.HasField("activity_task_failed_event_attributes")
                ]
                if failures:
                    break
                await asyncio.sleep(0.5)
        finally:
            await handle.terminate("test over")
            worker.stop()
    assert failures and set(failures) == {"webhook_address_not_public"}, failures
    assert receiver.deliveries == []
