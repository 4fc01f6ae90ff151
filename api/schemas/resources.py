"""Request and response models of the resource catalog and of source records."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from api.schemas.common import INT32_MAX, StrictRequest, json_integer


class RecordIn(StrictRequest):
    data: dict[str, Any] = Field(
        description="The whole record, as its type's declaration (GET /resources) describes it: unknown keys, "
        "nulls, wrong types and timestamps without a time zone are refused",
    )
    expected_version: Annotated[int, Field(ge=1, le=INT32_MAX), BeforeValidator(json_integer)] | None = Field(
        default=None, description="The version this write replaces; leave it out to create the record",
    )


class RecordWrittenOut(BaseModel):
    ref: str = Field(description="`<type>:<id>`: how other records and reads name this one")
    version: int
    replayed: bool = Field(description="The same data was already the current version: nothing was written")


class LongFieldOut(BaseModel):
    path: str
    sha256: str = Field(description="Of the value's JSON encoding, as the artifact store holds it")
    size_bytes: int
    characters: int


class RecordOut(BaseModel):
    ref: str
    resource: str
    record_id: str
    version: int
    data: dict[str, Any]
    long_fields: list[LongFieldOut] = Field(description="Fields of data stored in the artifact store")
    created_at: datetime
    updated_at: datetime


class SearchIn(StrictRequest):
    query: str = Field(min_length=1, max_length=1_000, description="What to look for (words of any language)")
    resource: str | None = Field(default=None, min_length=1, max_length=63,
                                 description="Search one type only; leave it out to search every type you may")
    top_k: Annotated[int, Field(ge=1, le=50), BeforeValidator(json_integer)] | None = Field(
        default=None, description="How many hits at most (default 10); fewer when 65,536 bytes are reached first",
    )


class ReadIn(StrictRequest):
    ref: str = Field(min_length=1, max_length=200, description="`<type>:<id>`, as list and search return it")
    cursor: str | None = Field(default=None, min_length=1, max_length=2_048,
                               description="The previous page's next_cursor, unchanged")
