"""The tenant's reminder webhook (PUT, GET and DELETE /tenant-webhook): the secret goes in, never out."""

from __future__ import annotations

from pydantic import BaseModel, Field

from api.schemas.common import StrictRequest

URL_PATTERN = r"^https?://[^\s/?#@]+(?:[/?#]\S*)?$"
"""An absolute http(s) URL without credentials or spaces; the address guard judges the rest."""


class WebhookIn(StrictRequest):
    url: str = Field(
        min_length=1, max_length=2048, pattern=URL_PATTERN,
        description="Absolute http(s) URL that receives signed reminders (no credentials, no spaces)",
    )
    secret: str = Field(min_length=16, max_length=256, description="HMAC-SHA256 key; stored, never returned")


class WebhookOut(BaseModel):
    url: str
    updated_at: str
    updated_by: str
    secret_set: bool = True
