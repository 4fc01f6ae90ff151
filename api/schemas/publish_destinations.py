"""A tenant's publish destinations (PUT, GET and DELETE /publish-destinations): the secret goes in, never out."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from api.schemas.common import StrictRequest
from api.schemas.webhooks import URL_PATTERN


class DestinationIn(StrictRequest):
    kind: Literal["archive", "webhook"] = Field(
        description="archive: mnemo's artifact store; webhook: a signed POST to url (the README's receiver contract)"
    )
    url: str | None = Field(default=None, min_length=1, max_length=2048,
                            pattern=URL_PATTERN,
                            description="webhook only: absolute http(s) URL of the receiver (no credentials)")
    secret: str | None = Field(default=None, min_length=16, max_length=256,
                               description="webhook only: HMAC-SHA256 key; stored, never returned")


class DestinationOut(BaseModel):
    name: str
    kind: Literal["archive", "webhook"]
    url: str | None = None
    secret_set: bool = False
    built_in: bool = False
    created_by: str | None = None
    updated_at: str | None = None


class DestinationListOut(BaseModel):
    items: list[DestinationOut]
