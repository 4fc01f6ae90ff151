"""OpenTelemetry traces: request → workflow → activity → SQL, exported over OTLP, or nothing at all.

:func:`configure_tracing` installs an SDK tracer provider only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is
set (the exporter reads the standard ``OTEL_*`` variables itself). Without it the global provider
stays OpenTelemetry's no-op one and :func:`tracing_active` is False: no instrumentation is installed,
no interceptor added, no span made. Tests install a provider of their own (an in-memory exporter)
before building the app and the worker.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from fastapi import FastAPI
from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from sqlalchemy import Engine

from memory.recall.stages import Stage

_instrumented: weakref.WeakSet[Engine] = weakref.WeakSet()
_sql_tracers: list[Any] = []  # EngineTracer objects hold the listeners; kept for the engine's life


def tracing_active() -> bool:
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def configure_tracing(service: str) -> None:
    """Export spans over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; otherwise do nothing."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or tracing_active():
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service)}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def instrument_app(app: FastAPI) -> None:
    """A server span per request (named by route template), when tracing is on."""
    if tracing_active():
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls="metrics,healthz")


def instrument_engine(engine: Engine) -> None:
    """A span per SQL statement of ``engine`` (statement text without parameters), once, when tracing is on."""
    if not tracing_active() or engine in _instrumented:
        return
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer

    usage = metrics.get_meter("mnemo.sql").create_up_down_counter("db.client.connections.usage")
    _sql_tracers.append(EngineTracer(trace.get_tracer("mnemo.sql"), engine, usage))  # type: ignore[no-untyped-call]
    _instrumented.add(engine)


def temporal_interceptors() -> list[Any]:
    """The Temporal client's interceptors: the SDK's tracing one when tracing is on (a worker built from the
    client inherits it, so workflow and activity spans continue the caller's trace)."""
    if not tracing_active():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


def recall_stage_span(name: Stage, start_ns: int, end_ns: int) -> None:
    """A finished recall stage as a span under the current one (the request's, in the handler's thread)."""
    if tracing_active():
        span = trace.get_tracer("mnemo.recall").start_span(f"recall.{name.value}", start_time=start_ns)
        span.end(end_time=end_ns)
