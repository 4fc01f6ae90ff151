"""Deletions and retention holds: what a caller asks to forget, the job that forgets it, and holds."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, Field

from api.schemas.common import IDENTITY_FIELDS, Lax, ShortText, StrictRequest


class TargetUser(StrictRequest):
    """Names a *target* user (whose data an admin acts on); authorised by role, never trusted as identity."""

    identity_fields: ClassVar[frozenset[str]] = IDENTITY_FIELDS - {"user_id"}


class MemoryScopeIn(StrictRequest):
    type: Literal["memory"]
    memory_id: Annotated[uuid.UUID, Lax]


class EventScopeIn(StrictRequest):
    type: Literal["event"]
    event_id: Annotated[uuid.UUID, Lax]


class SessionScopeIn(TargetUser):
    type: Literal["session"]
    session_id: ShortText
    user_id: ShortText | None = None


class SubjectScopeIn(TargetUser):
    type: Literal["subject"]
    user_id: ShortText | None = None


class RecordScopeIn(StrictRequest):
    """One source record of the caller's own (``DELETE /records/{resource}/{record_id}``)."""

    type: Literal["record"]
    resource: ShortText
    record_id: ShortText


ScopeIn = Annotated[MemoryScopeIn | EventScopeIn | SessionScopeIn | SubjectScopeIn | RecordScopeIn,
                    Field(discriminator="type")]


class DeletionRequestIn(StrictRequest):
    deletion_request_id: ShortText
    scope: ScopeIn


class DeletionAcceptedOut(BaseModel):
    job_id: uuid.UUID
    deletion_request_id: str
    status: str
    stage: Literal["accepted"] = "accepted"
    barrier: Literal["committed"] = "committed"
    purge_scheduled: bool
    warnings: list[str]


class LayerOut(BaseModel):
    layer: str
    status: str
    removed: int
    remaining: int | None
    evidence: dict[str, Any]
    updated_at: AwareDatetime


class DeletionJobOut(BaseModel):
    job_id: uuid.UUID
    deletion_request_id: str
    status: str
    scope: dict[str, str]
    epoch: int
    barrier_at: AwareDatetime
    updated_at: AwareDatetime
    completed_at: AwareDatetime | None
    fully_deleted: bool
    remaining_copies: list[str]
    last_error: str | None
    layers: list[LayerOut]


class HoldIn(TargetUser):
    user_id: ShortText
    reason: Annotated[str, Field(min_length=1, max_length=1_000)]


class HoldOut(BaseModel):
    hold_id: uuid.UUID
    user_id: str
    reason: str
    created_at: AwareDatetime
    released_at: AwareDatetime | None


class DeletionResumedOut(BaseModel):
    job_id: str
    status: str
    signal: Literal["resume"]
