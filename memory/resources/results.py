"""What list / search / read answer (seed 000 §2.1, §5): one set of models for the REST routes and the MCP
tools alike, so both return the same JSON (``model_dump(mode="json")``) and one schema documents both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

WITHHELD_TIME = "When the record last changed; null when that comes from a field this caller may not read"
WITHHELD_VERSION = "The source record's current version; null when that comes from a field this caller may not read"


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DirectoryEntry(Result):
    type: str
    description: str
    operations: list[str] = Field(description="What this caller may do with the type now: list, search, read")
    fields: list[str] = Field(description="Field paths (JSON Pointers, `*` for array items) this caller may read")


class Directory(Result):
    """``list()``: the resource types the caller may use now; a type with no readable field is absent."""

    audience: str = Field(description="`internal`, or `public` for a `public_client` key")
    run_id: str | None = Field(description="The run the access was computed for, if the request named one")
    resources: list[DirectoryEntry]


class ListItem(Result):
    ref: str = Field(description="`<type>:<id>`: what read() takes")
    resource: str
    title: str
    updated_at: datetime | None = Field(description=WITHHELD_TIME)
    version: int | None = Field(description=WITHHELD_VERSION)
    data: dict[str, Any] = Field(description="The readable fields of the record's current version (long ones left "
                                 "out: read the ref for them)")
    omitted: list[str] = Field(default_factory=list, description="Readable fields left out of `data` (declared long, "
                               "or too long for a list page): read the ref for them")


class ListPage(Result):
    """``list(resource, filters, cursor)``: one page of one type's records, newest change first."""

    items: list[ListItem]
    next_cursor: str | None = Field(description="Pass it back as `cursor` for the next page; null on the last one")


class SearchHit(Result):
    ref: str
    resource: str
    title: str
    snippet: str = Field(description="From the fields this caller may read only, re-read from the source record")
    state: str = Field(description="The record's current state as the ranker weighs it: `open` (a todo to do), "
                       "`closed` (done, cancelled), `none` (the type has no state) or `withheld` (it comes from a "
                       "field this caller may not read)")
    version: int | None = Field(description=WITHHELD_VERSION)
    updated_at: datetime | None = Field(description=WITHHELD_TIME)
    score: float = Field(description="The cross-resource ranker's score: higher first, deterministic")


class SearchResult(Result):
    items: list[SearchHit]
    omitted: int = Field(default=0, description="Hits within top_k left out so the response stays within 65,536 "
                         "bytes (the lowest ranked)")


class Fragment(Result):
    path: str = Field(description="The JSON Pointer of the value within the record's data")
    offset: int | None = Field(default=None, description="For a piece of a long string: the Unicode character "
                               "offset of this piece within the whole string")
    value: Any


class ReadPage(Result):
    """``read(ref, cursor?)``: ``data`` whole when it fits one page, else ``fragments`` page by page; only the last
    page says ``complete: true``."""

    ref: str
    version: int | None = Field(description=WITHHELD_VERSION)
    complete: bool
    data: dict[str, Any] | None = None
    fragments: list[Fragment] | None = None
    next_cursor: str | None = None
