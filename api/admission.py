"""Fair admission: every expensive route of a tenant has a budget, declared in one table (issue 23, finding 7).

Only recall had a per-tenant limit; eight parallel windows over a long session, a long CJK resource search or
a flood of deletion requests (each a workflow) of one tenant took another tenant's p95 from tens of
milliseconds to seconds. Here :data:`ROUTES` names the cost class of every expensive route (the MCP endpoint
included), and :class:`Admission` gives each tenant, per class and per API process, at most ``concurrency``
requests in flight and, for the classes that start workflows, a start budget (a token bucket refilled at
``per_minute``, spent by accepted requests). A request over either is refused at once, before any work, with
a 429 ``tenant_busy`` and ``Retry-After``: it never waits in line in front of other tenants. Routes not in the
table are cheap reads or writes of one row and are admitted as before.

The middleware learns the tenant from the request's API key, checked once per key and process with
:func:`memory.identity.auth.authenticate` (a key that does not authenticate is passed on unadmitted: its route answers
the 401), and remembers it by the key's digest, so an admitted request costs no extra statement.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from urllib.parse import parse_qs

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.console.csrf import cookie
from api.console.sessions import COOKIE, tenant_of_session
from api.deps import key_of
from api.errors import mnemo_error_response
from api.limits import TenantBusy, TenantLimiter
from api.settings import Settings
from memory.db import global_session
from memory.errors import InvalidInput, Unauthorized
from memory.identity.auth import authenticate


@dataclass(frozen=True)
class CostClass:
    """What one kind of expensive request may take of a tenant's share of an API process."""

    name: str
    what: str
    """The requests in a 429's sentence: "your tenant already has 2 {what} in progress"."""
    concurrency: Callable[[Settings], int]
    per_minute: Callable[[Settings], int] | None = None
    """Starts a tenant may make per minute (a token bucket), for requests that start workflows; None: no rate."""
    burst: Callable[[Settings], int] | None = None


COST_CLASSES: dict[str, CostClass] = {
    cls.name: cls
    for cls in (
        CostClass("recall", "recalls", lambda s: s.tenant_recall_concurrency),
        CostClass("read", "expensive reads (windows, summaries, resource list/search/read, MCP calls)",
                  lambda s: s.tenant_read_concurrency),
        CostClass("write", "long writes (message batches, events, records, sample data, agents' attempts, "
                  "schedules)",
                  lambda s: s.tenant_write_concurrency),
        CostClass("workflow", "workflow starts (commits, tasks)", lambda s: s.tenant_write_concurrency,
                  per_minute=lambda s: s.tenant_workflow_starts_per_minute,
                  burst=lambda s: s.tenant_workflow_start_burst),
        CostClass("deletion", "deletion starts", lambda s: s.tenant_deletion_concurrency,
                  per_minute=lambda s: s.tenant_deletion_starts_per_minute,
                  burst=lambda s: s.tenant_deletion_start_burst),
    )
}

ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/memory-query"): "recall",
    ("POST", "/recall/render"): "recall",
    ("GET", "/sessions/{session_id}"): "read",
    ("GET", "/sessions/{session_id}/window"): "read",
    ("GET", "/sessions/{session_id}/summaries/latest"): "read",
    ("GET", "/resources/{resource}"): "read",
    ("POST", "/resources/search"): "read",
    ("POST", "/resources/read"): "read",
    ("POST", "/mcp"): "read",
    ("POST", "/sessions/{session_id}/messages"): "write",
    ("POST", "/memory-events"): "write",
    ("POST", "/memory-candidates"): "write",
    ("POST", "/memory-events:batch"): "write",  # N items hold the slots of N writes: batch_slots
    ("POST", "/memory-candidates:batch"): "write",
    ("PUT", "/records/{resource}/{record_id}"): "write",
    ("POST", "/report-data/sample"): "write",
    ("POST", "/sessions/{session_id}/commit"): "workflow",
    ("POST", "/deletion-requests"): "deletion",
    ("DELETE", "/memories/{memory_id}"): "deletion",
    ("DELETE", "/records/{resource}/{record_id}"): "deletion",
    ("POST", "/memory-deletions/{job_id}/resume"): "deletion",
    ("POST", "/tasks"): "workflow",
    ("POST", "/tasks/{task_id}/attempts"): "write",
    ("POST", "/tasks/{task_id}/attempts/{attempt_id}/heartbeat"): "write",
    ("POST", "/tasks/{task_id}/attempts/{attempt_id}/complete"): "write",
    ("POST", "/tasks/{task_id}/attempts/{attempt_id}/fail"): "write",
    ("PUT", "/task-schedules/{name}"): "write",  # checks the goal as POST /tasks does, then writes to Temporal
    ("POST", "/knowledge-candidates"): "workflow",  # redacts, compares with published knowledge, starts a review
    ("PUT", "/knowledge-candidates/{candidate_id}"): "write",
    ("POST", "/knowledge-candidates/{candidate_id}/reviews"): "write",  # an approval embeds and publishes
}
"""(method, route path) -> cost class: the one place that says which requests are expensive."""

CONSOLE_ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/console/memory/{memory_id}/delete"): "deletion",
    ("POST", "/console/deletions/{job_id}/resume"): "deletion",
}
"""The console's forms that start what an API route of :data:`ROUTES` starts (they call the same code), in the
same class: the person is known by the console session cookie instead of a bearer key, and spends the same
budget. Without them a signed-in user started deletion workflows past the tenant's start budget."""

WINDOW_TOKENS_PER_SLOT = 32_000
"""A window takes one of its tenant's read slots per this many tokens of budget begun (all of them at most):
its work grows with its budget (:mod:`memory.sessions.recent`), so a tenant runs one 100,000-token window at
a time, or two of the default 4,000."""


def _window_weight(query: Mapping[str, list[str]]) -> int:
    budget = query.get("budget_tokens", ["4000"])[-1]
    return 1 + int(budget) // WINDOW_TOKENS_PER_SLOT if budget.isdigit() else 1  # a bad one is the route's 422


WEIGHTS: dict[tuple[str, str], Callable[[Mapping[str, list[str]]], int]] = {
    ("GET", "/sessions/{session_id}/window"): _window_weight,
}
"""Routes whose cost depends on their query string: the slots of their class one request takes."""

KNOWN_KEYS = 10_000
"""Key digests whose tenant a process remembers (least recently used dropped first); past as many tenants'
start buckets, the full ones are forgotten."""


class StartBudget:
    """Per tenant, a bucket of ``burst`` starts refilled at ``per_minute``: a flood is cut to the rate.

    A request is admitted while the bucket holds a start (:meth:`check`) and spends one only once it was
    accepted (:meth:`spend`, on a 2xx, or the 303 of a console form): a refused or malformed request starts
    nothing and costs nothing. Requests admitted together may overdraw the bucket by the class's concurrency
    at most; the debt delays the next."""

    def __init__(self, per_minute: int, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, at)

    def _tokens(self, tenant_id: str, now: float) -> float:
        tokens, at = self._buckets.get(tenant_id, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def check(self, tenant_id: str, what: str, count: int = 1) -> None:
        """Raise :class:`TenantBusy`, saying when the next start is due, unless the tenant has ``count`` left."""
        needed = float(count)
        with self._lock:
            tokens = self._tokens(tenant_id, self._clock())
        if tokens < needed:
            wait = max(1, math.ceil((needed - tokens) / self.rate))
            raise TenantBusy(
                f"your tenant made its {self.burst:.0f} {what} allowed at once and may make "
                f"{self.rate * 60:.0f} a minute on this server; retry in {wait} s",
                details={"retry_after_seconds": wait, "per_minute": round(self.rate * 60)},
            )

    def spend(self, tenant_id: str, count: int = 1) -> None:
        """``count`` starts of the tenant's were made."""
        now = self._clock()
        with self._lock:
            self._buckets[tenant_id] = (self._tokens(tenant_id, now) - count, now)
            if len(self._buckets) > KNOWN_KEYS:  # a full bucket is the default: forgetting one changes nothing
                self._buckets = {t: v for t, v in self._buckets.items() if self._tokens(t, now) < self.burst}


class Admission:
    """The budgets of one API process: a :class:`TenantLimiter` per cost class, a :class:`StartBudget` for
    the classes that have a rate."""

    def __init__(self, settings: Settings) -> None:
        self.limiters = {name: TenantLimiter(cls.concurrency(settings), cls.what) for name, cls in COST_CLASSES.items()}
        self.budgets = {
            name: StartBudget(cls.per_minute(settings), cls.burst(settings) if cls.burst else 1)
            for name, cls in COST_CLASSES.items() if cls.per_minute is not None
        }
        self._tenants: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, key: str) -> str | None:
        """The tenant of a key this process authenticated before (no statement), else None."""
        with self._lock:
            tenant = self._tenants.get(digest := hashlib.sha256(key.encode()).digest())
            if tenant is not None:
                self._tenants.move_to_end(digest)
            return tenant

    def tenant_of(self, engine: Engine, key: str) -> str | None:
        """The tenant of an API key that authenticates (remembered by its digest), else None."""
        digest = hashlib.sha256(key.encode()).digest()
        try:
            with global_session(engine) as session:
                tenant = authenticate(session, key).tenant_id
        except (Unauthorized, SQLAlchemyError):  # its route answers the 401, or the typed 503 of a database down
            return None
        with self._lock:
            self._tenants[digest] = tenant
            while len(self._tenants) > KNOWN_KEYS:
                self._tenants.popitem(last=False)
        return tenant


@dataclass
class Starts:
    """Workflow starts a request makes beyond its route's own class (a message batch's "don't remember …"
    deletions): checked against that class's start budget before any is made, spent once they were made."""

    budget: StartBudget | None
    tenant_id: str
    what: str
    made: int = 0

    def admit(self, count: int) -> None:
        """Raise :class:`TenantBusy` unless the tenant may start ``count`` more (nothing is made then)."""
        if self.budget is not None:
            if count > self.budget.burst:
                raise InvalidInput(
                    f"this request would make {count} {self.what} at once; a tenant may make at most "
                    f"{self.budget.burst:.0f} at once on this server: send fewer in one request",
                    code="too_many_starts", details={"starts": count, "burst": round(self.budget.burst)},
                )
            self.budget.check(self.tenant_id, self.what, count)
        self.made = count

    def available(self, count: int) -> bool:
        """Whether the tenant may start ``count`` more now; when it may, they count as admitted (for starts a
        request may also leave for later, as a policy commit waits for the next batch or the idle sweep)."""
        try:
            self.admit(count)
        except (TenantBusy, InvalidInput):
            return False
        return True

    def spend(self) -> None:
        """The admitted starts were made (call once the transaction that made them committed)."""
        if self.budget is not None and self.made:
            self.budget.spend(self.tenant_id, self.made)


def starts(state: object, name: str, tenant_id: str) -> Starts:
    """The start budget of class ``name`` for ``tenant_id`` in this API process (none when admission is off)."""
    admission: Admission | None = getattr(state, "admission", None)
    budget = admission.budgets.get(name) if admission is not None else None
    return Starts(budget, tenant_id, COST_CLASSES[name].what)


@contextmanager
def batch_slots(state: object, name: str, tenant_id: str, count: int) -> Iterator[None]:
    """A request of class ``name`` doing the work of ``count`` of its requests (a batch of ``count`` items)
    holds the slots that many requests in flight would (all of them at most): the middleware took one, this
    takes the rest or raises :class:`TenantBusy`. Without it a tenant ran its class's concurrency in batches of
    500, each admitted as one write."""
    admission: Admission | None = getattr(state, "admission", None)
    limiter = admission.limiters[name] if admission is not None else None
    more = min(count, limiter.limit) - 1 if limiter is not None else 0
    if limiter is None or more <= 0:
        yield
        return
    with limiter.slot(tenant_id, more):
        yield


def _pattern(path: str) -> re.Pattern[str]:
    """A route path as a regular expression: a ``{parameter}`` is one path segment, as the router reads it."""
    return re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)) + "$")


_PATTERNS = [(method, _pattern(path), name, WEIGHTS.get((method, path)))
             for (method, path), name in (ROUTES | CONSOLE_ROUTES).items()]


def cost_of(method: str, path: str, query_string: bytes = b"") -> tuple[str, int] | None:
    """The cost class of a request and the slots it takes, by its method, path and query (tests check that no
    other route shadows the table's)."""
    for routed, pattern, name, weight in _PATTERNS:
        if routed == method and pattern.match(path):
            return name, weight(parse_qs(query_string.decode("latin-1"))) if weight is not None else 1
    return None


def bearer_key(scope: Scope) -> str | None:
    """The key a request presents, read as its route will (:func:`api.deps.key_of`); None for none (its route
    answers the 401)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            try:
                return key_of(value.decode("latin-1"))
            except Unauthorized:
                return None
    return None


def console_session(scope: Scope, secure: bool) -> str | None:
    """The console session cookie a request carries, if it carries one."""
    name, _ = cookie(COOKIE, secure, "/console")
    for header, value in scope.get("headers", ()):
        if header == b"cookie":
            session_id = cookie_parser(value.decode("latin-1")).get(name)
            if session_id:
                return session_id
    return None


class AdmissionMiddleware:
    """Admits each request of :data:`ROUTES` under its tenant's budgets for its class, or answers the 429."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope["app"].state
        admission: Admission | None = getattr(state, "admission", None)
        cost = cost_of(scope["method"], scope["path"], scope.get("query_string", b"")) if admission else None
        key = bearer_key(scope) if cost is not None else None
        signed = (console_session(scope, state.settings.console_secure_cookie)
                  if cost is not None and key is None and scope["path"].startswith("/console/") else None)
        tenant: str | None = None
        if admission is not None and key is not None:
            tenant = admission.known(key) or await run_in_threadpool(admission.tenant_of, state.engine, key)
        elif admission is not None and signed is not None:  # read each time: a session ends with its id unchanged
            tenant = await run_in_threadpool(tenant_of_session, state.engine, signed)
        if admission is None or cost is None or tenant is None:
            await self.app(scope, receive, send)
            return
        name, weight = cost
        budget = admission.budgets.get(name)
        with ExitStack() as admitted:
            try:
                admitted.enter_context(admission.limiters[name].slot(tenant, weight))
                if budget is not None:
                    budget.check(tenant, COST_CLASSES[name].what)
            except TenantBusy as busy:  # refused before any work: nothing started, nothing to undo
                await mnemo_error_response(busy)(scope, receive, send)
                return
            status = 0

            async def observed(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            await self.app(scope, receive, observed if budget is not None else send)
            if budget is not None and 200 <= status < 400:  # accepted (a console form's 303): it started its workflow
                budget.spend(tenant)
