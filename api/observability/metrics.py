"""Prometheus metrics of one process: requests, recall stages and bundles, refusals, and the database's figures.

Events (a request, a recall stage) are counted in :data:`EVENTS`, this process's registry; figures the
database can answer (:mod:`memory.governance`) are read at scrape time by :class:`FigureCollector`, so
every process reports the same numbers. Each API process is scraped on its own (``mnemo api`` is one
uvicorn process; run several and list each as a target): no multiprocess directory to share or clean.
Labels are route templates, methods, statuses, stage names and error codes: never an id or a tenant's data.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory.embedders.health import failure_counts
from memory.errors import MnemoError
from memory.governance import FIGURES, read_figures
from memory.recall.bundle_types import Bundle
from memory.recall.stages import Stage
from memory.tokens import count_tokens

log = logging.getLogger("mnemo.metrics")
EVENTS = CollectorRegistry()
ProcessCollector(registry=EVENTS)

HTTP_DURATION = Histogram(
    "mnemo_http_request_duration_seconds", "HTTP requests by route template, method and status.",
    ("route", "method", "status"), registry=EVENTS,
)
RECALL_STAGE = Histogram(
    "mnemo_recall_stage_duration_seconds", "Time of each recall stage (memory.recall.stages).", ("stage",),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5), registry=EVENTS,
)
BUNDLE_ITEMS = Histogram(
    "mnemo_recall_bundle_items", "Memories injected into one bundle (items and knowledge).",
    buckets=(0, 1, 2, 4, 8, 16, 32, 64), registry=EVENTS,
)
BUNDLE_TOKENS = Histogram(
    "mnemo_recall_bundle_tokens", "Tokens (memory.tokens) of the memories injected into one bundle.",
    buckets=(0, 50, 100, 250, 500, 1000, 2000, 4000, 8000), registry=EVENTS,
)
RECALL_CONFLICTS = Counter(
    "mnemo_recall_conflicts", "Conflicts recall detected: decided by a rule, or left unresolved in the bundle.",
    ("resolution",), registry=EVENTS,
)
RECALL_DROPPED = Counter(
    "mnemo_recall_candidates_dropped", "Candidates dropped at the re-read: no longer current or no longer visible.",
    registry=EVENTS,
)
STALE_USED = Counter(
    "mnemo_recall_stale_versions_used", "Injected memories that were not ACTIVE (superseded, expired): must stay 0.",
    registry=EVENTS,
)
TASK_RESUMES = Counter(
    "mnemo_recall_task_resumes", "RESUME_TASK bundles built with the live task state (cross-session resumes).",
    registry=EVENTS,
)
REFUSALS = Counter(
    "mnemo_stale_refusals", "Requests refused because what they acted on was stale, by machine code.",
    ("code",), registry=EVENTS,
)


class ModelFailures(Collector):
    """Calls to an embedding or rerank model that failed in this process (:mod:`memory.embedders.health`, where
    the embedders and the reranker count them), by stage and machine code."""

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("mnemo_model_failures", "Failed calls to an embedding or rerank model.",
                                     labels=("stage", "code"))
        for (stage, code), count in sorted(failure_counts().items()):
            family.add_metric((stage, code), count)
        yield family


EVENTS.register(ModelFailures())

STALE_CODES = frozenset(
    {"stale_artifact", "version_conflict", "revision_not_reached", "stale_deletion_epoch"}
)
"""A draft, version, revision or deletion epoch older than the current one: the "stale bundles refused"."""


def observe_stage(name: Stage, start_ns: int, end_ns: int) -> None:
    RECALL_STAGE.labels(name.value).observe((end_ns - start_ns) / 1e9)


def observe_bundle(bundle: Bundle) -> None:
    """A built bundle's sizes and governance events; reads ids, statuses and counts only."""
    injected = bundle.items
    BUNDLE_ITEMS.observe(len(injected))
    BUNDLE_TOKENS.observe(sum(count_tokens(i.content) for i in injected))
    RECALL_CONFLICTS.labels("decided").inc(len(bundle.conflict_decisions))
    RECALL_CONFLICTS.labels("unresolved").inc(len(bundle.conflicts))
    RECALL_DROPPED.inc(bundle.dropped_on_reread)
    STALE_USED.inc(sum(1 for i in injected if i.status != "ACTIVE"))
    if bundle.task_state is not None:
        TASK_RESUMES.inc()


FIGURES_UP = "1 when the database's figures were read at this scrape, 0 when that failed (they are then absent)."


class FigureCollector(Collector):
    """The database's figures, read at every scrape (one transaction, each statement time-limited; no cache, so a
    figure is never older than the scrape).

    A read that fails is not an empty answer: ``mnemo_figures_up`` says 0, the figures are absent (a
    dashboard shows the gap), and the error is logged.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterable[Metric]:
        try:
            rows = read_figures(self.engine)
        except Exception:
            log.exception("reading the database's figures for /metrics failed")
            yield GaugeMetricFamily("mnemo_figures_up", FIGURES_UP, value=0)
            return
        yield GaugeMetricFamily("mnemo_figures_up", FIGURES_UP, value=1)
        for figure in FIGURES:
            family = GaugeMetricFamily(figure.name, figure.help, labels=list(figure.labels))
            for labels, value in rows[figure.name]:
                family.add_metric(list(labels), value)
            yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())  # read at scrape only: registering must not query the database


class RequestMetrics:
    """ASGI middleware: each HTTP request's duration by its route *template* (``/memories/{memory_id}``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            HTTP_DURATION.labels(template, scope["method"], str(status)).observe(time.perf_counter() - started)


def render(*registries: CollectorRegistry) -> bytes:
    return b"".join(generate_latest(r) for r in registries)


def install_metrics(app: FastAPI, engine_of: Any) -> None:
    """``/metrics`` (events of this process and the database's figures) and the request middleware.

    ``engine_of(app)`` gives the app's engine once the lifespan made it.
    """
    app.add_middleware(RequestMetrics)
    figures: dict[str, CollectorRegistry] = {}

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        if "registry" not in figures:
            registry = CollectorRegistry()
            registry.register(FigureCollector(engine_of(request.app)))
            figures["registry"] = registry
        return Response(render(EVENTS, figures["registry"]), media_type=CONTENT_TYPE_LATEST)

    previous = app.exception_handlers.get(MnemoError)
    if previous is None:
        raise RuntimeError("install_metrics runs after the error handlers are installed")

    async def count_stale(request: Request, exc: Exception) -> Response:
        if isinstance(exc, MnemoError) and exc.code in STALE_CODES:
            REFUSALS.labels(exc.code).inc()
        response = previous(request, exc)
        return await response if inspect.isawaitable(response) else response

    app.add_exception_handler(MnemoError, count_stale)
