"""The FastAPI application (OpenAPI at /docs, its Swagger UI served from a package: no CDN) and the console."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline

from api.console import mount_console
from api.errors import (
    StrictJsonMiddleware,
    install_error_handlers,
    install_openapi,
    install_unavailable_handlers,
    refuse_guarded,
)
from api.limits import EmbeddingLanes, TenantLimiter
from api.routers import deletions, events, health, memories, policies, recall, resources, sessions, tasks
from api.schemas.common import ErrorOut
from api.settings import Settings
from memory.db import make_engine
from memory.resources.catalog import load_catalog


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    database_url = settings.require_database_url()
    # Declarations are checked before anything starts: a bad one stops the process, naming the problem.
    catalog = load_catalog(settings.resource_declarations_dir)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.catalog = catalog
        app.state.engine = make_engine(
            database_url, pool_size=settings.db_pool_size, statement_timeout_seconds=settings.statement_timeout_seconds
        )
        app.state.recall_limiter = TenantLimiter(settings.tenant_recall_concurrency)
        app.state.embedding_lanes = EmbeddingLanes(settings.query_embedding_engines)
        app.state.temporal = None  # connected on first use, so the API starts even while Temporal is down
        try:
            yield
        finally:
            app.state.embedding_lanes.close()  # its lanes stop and their engine children exit
            app.state.engine.dispose()

    app = FastAPIOffline(
        title="mnemo",
        version="0.1.0",
        summary="Governed memory and durable tasks for AI agents.",
        lifespan=lifespan,
        dependencies=[Depends(refuse_guarded)],
    )
    app.add_middleware(StrictJsonMiddleware)
    install_error_handlers(app)
    install_unavailable_handlers(app)
    install_openapi(app, ErrorOut)
    app.include_router(health.router)
    app.include_router(events.router)
    app.include_router(memories.router)
    app.include_router(deletions.router)
    app.include_router(tasks.router)
    app.include_router(recall.router)
    app.include_router(policies.router)
    app.include_router(sessions.router)
    app.include_router(resources.router)
    mount_console(app)
    return app
