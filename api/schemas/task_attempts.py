"""Request and response bodies of the agent protocol (``/tasks/{id}/attempts``): an agent outside the worker claims
the step its task waits on, renews the lease, and completes or fails it (:mod:`memory.tasks.leases`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from api.schemas.common import Integer, StrictRequest
from api.schemas.tasks import SHA256, Reason
from memory.tasks.leases import LEASE_DEFAULT, LEASE_MAX, LEASE_MIN

MAX_ARTIFACTS = 20
"""Artifacts per complete. Their bytes travel base64-encoded in the body, which the request guard bounds at
1 MiB (a 413 beyond): about 760 KiB of artifact bytes per call."""

StepId = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,62}$")]


# --- requests ------------------------------------------------------------------------------------


class ClaimIn(StrictRequest):
    step_id: StepId | None = Field(default=None, description="The step you mean to perform; by default the one "
                                   "the task waits on")
    lease_seconds: Integer = Field(default=LEASE_DEFAULT, ge=LEASE_MIN, le=LEASE_MAX,
                                   description="How long the claim holds the step; each heartbeat renews it as long")


class ArtifactIn(StrictRequest):
    name: Annotated[str, Field(min_length=1, max_length=200, pattern=r'^[^/\\"\x00-\x1f\x7f]+$',
                               description="Any name without '/', '\\', '\"' or control characters",
                               examples=["digest.md", "事故摘要.md"])]
    media_type: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9.+-]{0,126}"
                                             r"(;[ -~]{1,200})?$", examples=["text/markdown"])]
    content_base64: Annotated[str, Field(description="The bytes, standard base64 (RFC 4648 §4) with padding")]


class CompleteIn(StrictRequest):
    artifacts: list[ArtifactIn] = Field(max_length=MAX_ARTIFACTS, description="Names unique within the call")
    output: dict[str, Any] = Field(default_factory=dict, description="The step's output (a JSON object)")


class FailIn(StrictRequest):
    reason: Reason
    retryable: bool = Field(description="true: the step may be claimed again (until it failed 5 times); false: the "
                            "step gives up and its task fails")


# --- responses -----------------------------------------------------------------------------------


class ArtifactRefOut(BaseModel):
    step_id: str
    name: str
    media_type: str
    sha256: SHA256 = Field(description="Its bytes: GET /tasks/{task_id}/artifacts/{sha256}")


class StepInputOut(BaseModel):
    goal: dict[str, Any]
    artifacts: list[ArtifactRefOut] = Field(description="Every artifact of the task so far, oldest first")
    rejection_reason: str | None = Field(default=None, description="After an approver rejected the draft: why "
                                         "(absent otherwise)")

    @model_serializer(mode="wrap")
    def _absent_unless_rejected(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``rejection_reason`` is left out, not null, when there was none (REST and MCP alike)."""
        body: dict[str, Any] = handler(self)
        if body.get("rejection_reason") is None:
            body.pop("rejection_reason", None)
        return body


class ClaimOut(BaseModel):
    attempt_id: str
    step_id: str
    attempt_number: int
    lease_expires_at: datetime
    input: StepInputOut


class HeartbeatOut(BaseModel):
    attempt_id: str
    lease_expires_at: datetime


class CompleteOut(BaseModel):
    attempt_id: str
    step_id: str
    status: Literal["SUCCEEDED"]
    artifacts: list[ArtifactRefOut]
    replayed: bool = Field(description="The same body was sent before: this is its answer, nothing changed")


class FailOut(BaseModel):
    attempt_id: str
    step_id: str
    status: Literal["FAILED"]
    step_status: Literal["WAITING", "GAVE_UP"] = Field(description="WAITING: the step may be claimed again; "
                                                       "GAVE_UP: its task fails")
    replayed: bool
