"""Batch writes (``POST /memory-events:batch``, ``POST /memory-candidates:batch``): the envelope and the results.

The envelope is checked whole (1 to :data:`MAX_BATCH_ITEMS` objects, else the request is a 422); each item is
the single route's body, checked on its own, so a bad item is that item's error and never the others'.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, create_model
from pydantic_core import PydanticCustomError

from api.schemas.common import ErrorDetail, StrictRequest
from memory.store.batches import MAX_BATCH_ITEMS


def _at_most_the_limit(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(items) > MAX_BATCH_ITEMS:
        raise PydanticCustomError(
            "batch_too_large",
            "{count} items; a batch holds at most {limit}: split it into several requests",
            {"count": len(items), "limit": MAX_BATCH_ITEMS},
        )
    return items


class BatchIn(StrictRequest):
    items: Annotated[
        list[dict[str, Any]],
        Field(min_length=1, json_schema_extra={"maxItems": MAX_BATCH_ITEMS},
              description=f"1 to {MAX_BATCH_ITEMS} bodies of the single route, each checked on its own"),
        AfterValidator(_at_most_the_limit),
    ]


Outcome = Literal["committed", "replayed", "error"]


class BatchItemOut(BaseModel):
    index: int = Field(description="the item's place in the request's items, from 0")
    outcome: Outcome
    error: ErrorDetail | None = Field(default=None, description="why this item alone was refused (outcome error)")


def item_model(single: type[BaseModel]) -> type[BatchItemOut]:
    """A batch item's answer: index and outcome, and the single route's answer (its fields, absent for an error)."""
    annotations: dict[str, Any] = {name: info.annotation for name, info in single.model_fields.items()}
    fields: dict[str, Any] = {name: (annotation | None, None) for name, annotation in annotations.items()}
    return create_model(f"{single.__name__}Item", __base__=BatchItemOut, **fields)


def batch_model(item: type[BatchItemOut]) -> type[BaseModel]:
    """The answer of a batch: one result per item, in the request's order, and how many ended each way."""
    return create_model(
        item.__name__.removesuffix("Item") + "Batch",
        results=(list[item], ...),  # type: ignore[valid-type]
        committed=(int, ...), replayed=(int, ...), errors=(int, ...),
    )
