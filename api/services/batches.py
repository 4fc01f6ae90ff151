"""Batch writes: each item parsed as the single route parses its body, and the per-item answer.

A body that does not parse, or that the route's own conversion refuses, is that item's error (the others go on);
what parses goes to the store's batch function (:func:`memory.store.events.record_events`,
:func:`memory.store.memories.create_memories`), which applies the single write's rules to every item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from api.errors import field_problem
from api.schemas.batches import BatchItemOut
from api.schemas.common import ErrorDetail, FieldProblem
from memory.errors import InvalidInput, MnemoError

Body = TypeVar("Body", bound=BaseModel)
Item = TypeVar("Item")


class InvalidItem(InvalidInput):
    """An item whose body does not parse: the first problem's code and sentence, and every problem by field."""

    def __init__(self, exc: ValidationError) -> None:
        self.fields = [FieldProblem(**field_problem(dict(error))) for error in exc.errors()]
        first = self.fields[0]
        super().__init__(first.message, code=first.code)


def parse_items(items: Sequence[dict[str, Any]], model: type[Body], convert: Callable[[Body], Item]
                ) -> list[Item | MnemoError]:
    """Each raw item as ``model`` then ``convert`` (the single route's parsing), or the error refusing it."""
    parsed: list[Item | MnemoError] = []
    for raw in items:
        try:
            parsed.append(convert(model.model_validate(raw)))
        except ValidationError as exc:
            parsed.append(InvalidItem(exc))
        except MnemoError as refused:
            parsed.append(refused)
    return parsed


def batch_answer(item: type[BatchItemOut], results: Sequence[tuple[BaseModel, bool] | MnemoError]
                 ) -> dict[str, Any]:
    """The batch's answer: per item (in order) the single route's answer and whether it was a replay, or its
    error; and the counts."""
    answers: list[BatchItemOut] = []
    for index, result in enumerate(results):
        if isinstance(result, MnemoError):
            error = ErrorDetail(code=result.code, message=result.message, details=result.details,
                                fields=getattr(result, "fields", []))
            answers.append(item(index=index, outcome="error", error=error))
        else:
            single, replayed = result
            answers.append(item(index=index, outcome="replayed" if replayed else "committed", **single.model_dump()))
    counts = {outcome: sum(1 for a in answers if a.outcome == outcome) for outcome in ("committed", "replayed")}
    return {"results": answers, **counts, "errors": len(answers) - sum(counts.values())}
