"""Fair admission (issue 23, finding 7): every expensive route has a per-tenant budget, declared in one table.

Before, only recall had one: eight parallel windows of one tenant, or its flood of deletion requests, took
another tenant's p95 from tens of milliseconds to seconds. These tests hold a tenant's slots of the running
app's real limiters (as the recall test does) and check, for every route of :data:`api.admission.ROUTES`,
that the busy tenant is refused at once with a 429 ``tenant_busy`` and ``Retry-After`` while another tenant is
served; the start budget is checked over HTTP and, as a property, on a simulated clock.
"""

from __future__ import annotations

import re
import uuid
from contextlib import ExitStack

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from api.admission import COST_CLASSES, ROUTES, WINDOW_TOKENS_PER_SLOT, StartBudget, cost_of
from api.limits import TenantBusy, TenantLimiter
from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.factories import candidate


def _url(path: str) -> str:
    """A concrete URL for a route path: every parameter ``x`` (admission answers before the route looks)."""
    return re.sub(r"\{[^}]+\}", "x", path)


def test_the_table_names_only_routes_the_app_serves_and_each_request_finds_its_own_class(client: TestClient) -> None:
    paths = client.app.openapi()["paths"]  # type: ignore[attr-defined]
    served = {(method.upper(), path) for path, operations in paths.items() for method in operations}
    served.add(("POST", "/mcp"))  # the MCP endpoint, outside FastAPI's routing and its OpenAPI
    assert set(ROUTES) <= served, set(ROUTES) - served
    assert set(ROUTES.values()) <= set(COST_CLASSES)
    for method, path in served:  # no route is shadowed by, or shadows, an admitted one
        cost = cost_of(method, _url(path))
        assert (cost[0] if cost else None) == ROUTES.get((method, path)), (method, path)
    for method, path in ROUTES:
        if path in paths:
            assert "429" in paths[path][method.lower()]["responses"], (method, path)


def test_every_admitted_route_refuses_a_busy_tenant_at_once_and_serves_the_others(
    client: TestClient, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    busy, other = make_key(tenant=tenant), make_key()
    limiters = client.app.state.admission.limiters  # type: ignore[attr-defined]
    with ExitStack() as held:
        for limiter in limiters.values():  # every class's slots of the tenant taken, as by requests in flight
            for _ in range(limiter.limit):
                held.enter_context(limiter.slot(tenant))
        for (method, path), name in ROUTES.items():
            refused = client.request(method, _url(path), headers=auth(busy), json={})
            assert refused.status_code == 429, (method, path, refused.text)
            error = refused.json()["error"]
            assert error["code"] == "tenant_busy" and refused.headers["Retry-After"] == "1", (method, path)
            assert COST_CLASSES[name].what in error["message"]
            served = client.request(method, _url(path), headers=auth(other), json={})
            assert served.status_code != 429, (method, path, served.text)
            unknown = client.request(method, _url(path), headers=auth(busy + "x"), json={})
            assert unknown.status_code == 401, (method, path, unknown.text)  # a bad key is the route's 401
    assert client.get("/sessions/x/window", headers=auth(busy)).status_code == 404  # the slots are free again


def test_a_large_window_takes_all_of_its_tenants_read_slots(client: TestClient, make_key: MakeKey) -> None:
    """A window's work grows with its budget: a 100,000-token one runs alone among its tenant's reads."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    reads = client.app.state.admission.limiters["read"]  # type: ignore[attr-defined]
    weight = 1 + 100_000 // WINDOW_TOKENS_PER_SLOT
    assert cost_of("GET", "/sessions/s/window", b"budget_tokens=100000") == ("read", weight) and weight >= reads.limit
    with reads.slot(tenant):  # one read of the tenant in flight
        big = client.get("/sessions/x/window?budget_tokens=100000", headers=auth(key))
        assert big.status_code == 429 and big.json()["error"]["code"] == "tenant_busy", big.text
        assert client.get("/sessions/x/window", headers=auth(key)).status_code == 404  # a default one fits
        bad = client.get("/sessions/x/window?budget_tokens=lots", headers=auth(key))
        assert bad.status_code == 422, bad.text  # a budget that is no number weighs one slot: the route refuses it
    assert client.get("/sessions/x/window?budget_tokens=100000", headers=auth(key)).status_code == 404


def test_a_tenant_has_one_deletion_start_in_flight_by_default(client: TestClient, make_key: MakeKey) -> None:
    """A deletion's barrier fingerprints the subject's kept words: one at a time per tenant, the next is a 429 while it
    runs (another tenant's is not)."""
    tenant, other = (f"t-{uuid.uuid4().hex[:12]}" for _ in range(2))
    deletions = client.app.state.admission.limiters["deletion"]  # type: ignore[attr-defined]
    assert deletions.limit == 1
    body = {"deletion_request_id": "d-1", "scope": {"type": "memory", "memory_id": str(uuid.uuid4())}}
    with deletions.slot(tenant):  # one deletion of the tenant in flight
        busy = client.post("/deletion-requests", json=body, headers=auth(make_key(tenant=tenant)))
        assert busy.status_code == 429 and busy.json()["error"]["code"] == "tenant_busy", busy.text
        free = client.post("/deletion-requests", json=body, headers=auth(make_key(tenant=other)))
        assert free.status_code == 404, free.text  # admitted: the memory does not exist


@settings(max_examples=200, deadline=None)
@given(limit=st.integers(1, 6), weights=st.lists(st.integers(1, 10), max_size=30))
def test_weighted_slots_never_exceed_the_limit_and_refuse_only_what_does_not_fit(
    limit: int, weights: list[int]
) -> None:
    limiter = TenantLimiter(limit, "reads")
    held = 0
    with ExitStack() as stack:
        for weight in weights:
            taken = min(weight, limit)
            try:
                stack.enter_context(limiter.slot("t", weight))
            except TenantBusy:
                assert held + taken > limit
            else:
                held += taken
                assert held <= limit
        with limiter.slot("other", limit):  # another tenant's slots are its own
            pass
    with limiter.slot("t", limit):  # every slot is free again
        pass
    assert WINDOW_TOKENS_PER_SLOT > 4_000  # a default window takes one slot


def test_workflow_starts_of_a_tenant_are_cut_to_its_start_budget(settings: Settings, make_key: MakeKey) -> None:
    """Accepted starts spend the budget; a request that starts nothing (a 404, a 422) spends none."""
    tight = settings.model_copy(update={"tenant_deletion_starts_per_minute": 1, "tenant_deletion_start_burst": 2})
    flooder, other = make_key(roles=("admin",)), make_key(roles=("admin",))
    with TestClient(create_app(tight)) as api:
        memory_ids = [api.post("/memory-candidates", json=candidate(f"note {n}"), headers=auth(flooder)).json()[
            "memory_id"] for n in range(3)]
        for _ in range(3):  # nothing to delete: nothing started, nothing spent
            assert api.delete(f"/memories/{uuid.uuid4()}", headers=auth(flooder)).status_code == 404
        answers = [api.delete(f"/memories/{memory_id}", headers=auth(flooder)) for memory_id in memory_ids]
        assert [a.status_code for a in answers] == [202, 202, 429], [a.text for a in answers]
        refused = answers[-1]
        assert refused.json()["error"]["code"] == "tenant_busy"
        assert 50 <= int(refused.headers["Retry-After"]) <= 60  # one start a minute: the next is due in a minute
        assert refused.json()["error"]["details"]["per_minute"] == 1
        assert api.post("/deletion-requests", json={"deletion_request_id": "d", "scope": {
            "type": "memory", "memory_id": memory_ids[-1]}}, headers=auth(flooder)).status_code == 429  # one budget
        assert api.get(f"/memories/{memory_ids[-1]}", headers=auth(flooder)).status_code == 200  # nothing deleted
        assert api.delete(f"/memories/{uuid.uuid4()}", headers=auth(other)).status_code == 404  # others go on


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=200, deadline=None)
@given(
    per_minute=st.integers(1, 600), burst=st.integers(1, 50),
    steps=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.floats(0, 5), st.booleans()), max_size=200),
)
def test_a_start_budget_never_lets_more_through_than_its_rate_and_burst(
    per_minute: int, burst: int, steps: list[tuple[str, float, bool]]
) -> None:
    """Over any run of requests (each accepted or not), a tenant makes at most ``burst + rate * elapsed``
    starts; the other tenant's first ``burst`` starts are never refused, whatever the first one did."""
    clock = Clock()
    budget = StartBudget(per_minute, burst, clock=clock)
    started: dict[str, list[float]] = {"a": [], "b": []}
    for tenant, wait, accepted in steps:
        clock.now += wait
        try:
            budget.check(tenant, "starts")
        except TenantBusy as busy:
            assert busy.details["retry_after_seconds"] >= 1
            assert len(started[tenant]) >= burst  # refused only once its burst is spent
            continue
        if accepted:
            budget.spend(tenant)
            started[tenant].append(clock.now)
    for times in started.values():
        for first in range(len(times)):
            for last in range(first, len(times)):
                allowed = burst + (times[last] - times[first]) * per_minute / 60.0
                assert last - first + 1 <= allowed + 1e-9
