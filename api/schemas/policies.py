"""The tenant's policy (GET and PUT /tenant-policy)."""

from __future__ import annotations

from pydantic import BaseModel, StrictBool

from api.schemas.common import StrictRequest


class PolicyOut(BaseModel):
    separation_of_duties: bool


class PolicyIn(StrictRequest):
    separation_of_duties: StrictBool
