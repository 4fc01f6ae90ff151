"""The FastAPI application (OpenAPI at /docs, its Swagger UI served from a package: no CDN) and the console."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline
from starlette.routing import Route

from api.admission import Admission, AdmissionMiddleware
from api.console import mount_console
from api.errors import install_error_handlers, install_unavailable_handlers
from api.limits import EmbeddingLanes
from api.mcp import legacy as mcp_legacy
from api.mcp.server import PATH as MCP_PATH
from api.mcp.server import McpEndpoint
from api.observability import tracing
from api.observability.logging import RequestLogging
from api.observability.metrics import install_metrics, observe_stage
from api.openapi import install_openapi
from api.request_guard import StrictJsonMiddleware, refuse_guarded
from api.routers import (
    agent_policies,
    deletions,
    events,
    health,
    knowledge,
    knowledge_candidates,
    memories,
    policies,
    publish_destinations,
    recall,
    resources,
    root,
    runs,
    sessions,
    skills,
    task_attempts,
    task_definitions,
    task_schedules,
    tasks,
    webhooks,
)
from api.schemas.common import ErrorOut
from api.settings import Settings
from memory import offload
from memory.db import make_engine
from memory.embedders.rerank import Reranker
from memory.recall.stages import Stage, observe_stages
from memory.resources.catalog import load_catalog
from memory.resources.reader import Reader
from memory.tasks import registry


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    database_url = settings.require_database_url()
    # Declarations are checked before anything starts: a bad one stops the process, naming the problem.
    catalog = load_catalog(settings.resource_declarations_dir)
    registry.load(settings.task_module_names())  # a task module that cannot be imported stops the process too
    cursor_keys = settings.cursor_signing_keys()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.catalog = catalog
        app.state.engine = make_engine(
            database_url, pool_size=settings.db_pool_size, statement_timeout_seconds=settings.statement_timeout_seconds
        )
        app.state.artifacts = settings.artifact_root(app.state.engine)
        app.state.reader = Reader.build(app.state.engine, catalog, app.state.artifacts, cursor_keys)
        tracing.instrument_engine(app.state.engine)
        app.state.admission = Admission(settings)
        app.state.recall_limiter = app.state.admission.limiters["recall"]
        app.state.embedding_lanes = EmbeddingLanes(settings.query_embedding_engines, settings)
        app.state.reranker = Reranker.from_settings(settings)  # None unless MNEMO_RERANK_BASE_URL is set
        app.state.temporal = None  # connected on first use, so the API starts even while Temporal is down
        app.state.mcp_legacy_usage = mcp.usage
        await asyncio.to_thread(offload.start, settings.cpu_pool_workers, settings.cpu_pool_niceness,
                            settings.cpu_pool_idle)
        try:
            async with mcp.running():
                yield
        finally:
            offload.stop()
            app.state.embedding_lanes.close()  # its lanes stop and their engine children exit
            if app.state.reranker is not None:
                app.state.reranker.close()
            app.state.engine.dispose()

    app = FastAPIOffline(
        title="mnemo",
        version="0.1.0",
        summary="Governed memory and durable tasks for AI agents.",
        lifespan=lifespan,
        dependencies=[Depends(refuse_guarded)],
    )
    app.add_middleware(StrictJsonMiddleware)
    app.add_middleware(AdmissionMiddleware)  # before the body is read: a refused request costs no parsing
    install_error_handlers(app)
    install_unavailable_handlers(app)
    install_openapi(app, ErrorOut)
    install_metrics(app, lambda running: running.state.engine)
    app.add_middleware(RequestLogging)  # outermost: its request id and context cover every line of the request
    tracing.instrument_app(app)
    observe_stages(_observe_stage)
    app.include_router(root.router)
    app.include_router(health.router)
    app.include_router(events.router)
    app.include_router(memories.router)
    app.include_router(deletions.router)
    app.include_router(tasks.router)
    app.include_router(task_definitions.router)
    app.include_router(task_attempts.router)
    app.include_router(task_schedules.router)
    app.include_router(skills.router)
    app.include_router(knowledge_candidates.router)
    app.include_router(knowledge.router)
    app.include_router(recall.router)
    app.include_router(policies.router)
    app.include_router(sessions.router)
    app.include_router(resources.router)
    app.include_router(runs.router)
    app.include_router(agent_policies.router)
    app.include_router(mcp_legacy.router)
    # The MCP endpoint: the SDK's app behind its own auth (the same API keys), outside FastAPI's routing.
    mcp = McpEndpoint(settings, app.state, catalog)
    app.router.routes.append(Route(MCP_PATH, mcp.asgi, include_in_schema=False))
    app.include_router(webhooks.router)
    app.include_router(publish_destinations.router)
    mount_console(app, cursor_keys)
    return app


def _observe_stage(name: Stage, start_ns: int, end_ns: int) -> None:
    observe_stage(name, start_ns, end_ns)
    tracing.recall_stage_span(name, start_ns, end_ns)
