"""The error responses in the OpenAPI: every operation documents each error it may answer with, in mnemo's body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from api.admission import ROUTES
from api.request_guard import MAX_BODY_BYTES, MAX_HEADER_BYTES
from api.schemas.common import without_nul, without_null
from api.schemas.tasks import document_task_types

_DESCRIPTIONS = {
    401: "No valid API key (always answered before any 422)",
    403: "The key's roles do not allow this",
    404: "No such object in the caller's tenant (another tenant's object gets the same answer)",
    409: "Conflicts with the current state (idempotency, a stale version, a closed task, ...)",
    413: f"Body over {MAX_BODY_BYTES} bytes",
    422: "The request is invalid: a typed code per problem",
    429: "Too many requests of the caller's tenant in flight, or workflow starts this minute (tenant_busy): "
         "retry after Retry-After",
    431: f"Request headers over {MAX_HEADER_BYTES} bytes in total",
    500: "An unexpected failure: nothing of it is shown, quote its request_id",
    503: "A dependency is down or too slow (database_unavailable, statement_timeout, temporal_unavailable, "
         "embedding_unavailable, ...): retry after Retry-After",
}


def error_statuses(method: str, operation: dict[str, Any], *, admitted: bool = False) -> list[int]:
    """The error statuses an OpenAPI operation may answer with: every one with the error body. ``admitted``: the
    operation has a per-tenant budget (:data:`api.admission.ROUTES`), so it may answer 429 ``tenant_busy``."""
    statuses = {422, 431, 500}  # the guard's 422s (a NUL in the query...) and 431 reach every route
    if method.upper() in ("POST", "PUT", "PATCH"):
        statuses.add(413)
    if operation.get("security"):  # it takes an API key (see api.deps.BEARER)
        # 503: every such operation reads the key from the database, which can be down or time out.
        statuses |= {401, 403, 404, 503}
        if method.upper() != "GET":
            statuses.add(409)
    if any(parameter.get("in") == "path" for parameter in operation.get("parameters", [])):
        statuses.add(404)
    if admitted:
        statuses.add(429)
    return sorted(statuses)


def install_openapi(app: FastAPI, error_model: type[Any]) -> None:
    """Every operation documents the errors it may answer with, all with ``error_model``'s body (instead of
    FastAPI's own 422 body, which mnemo never sends); a parameter's schema offers neither ``null`` nor a NUL."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        document = error_model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(document.pop("$defs", {}))
        schemas[error_model.__name__] = document
        reference = {"$ref": f"#/components/schemas/{error_model.__name__}"}
        for route, path in schema.get("paths", {}).items():
            for method, operation in path.items():
                for parameter in operation.get("parameters", []):
                    without_null(parameter.get("schema", {}))
                    without_nul(parameter.get("schema", {}))
                for status in error_statuses(method, operation, admitted=(method.upper(), route) in ROUTES):
                    operation["responses"][str(status)] = {
                        "description": _DESCRIPTIONS[status], "content": {"application/json": {"schema": reference}},
                    }
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        document_task_types(schemas)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

