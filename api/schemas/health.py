"""Liveness and readiness (GET /healthz, GET /readyz)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class HealthOut(BaseModel):
    status: Literal["ok"]


class CheckOut(BaseModel):
    """One dependency's state; ``error`` (and ``tenant`` for the demo data) only when it is not ok."""

    state: Literal["ok", "unavailable", "loading", "unknown"]
    error: str = ""
    tenant: str = ""


class ReadinessOut(BaseModel):
    ready: bool
    checks: dict[str, CheckOut]


class IndexOut(BaseModel):
    """What ``GET /`` tells an API client: where each part of mnemo is (paths on this server)."""

    service: Literal["mnemo"]
    console: str
    docs: str
    openapi: str
    health: str
    ready: str
    metrics: str
    mcp: str
