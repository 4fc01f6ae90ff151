"""The residue scan of mnemo's own workflow histories: their payloads decoded and matched against a job's
fingerprints. A pure function of serialized histories, so that it runs in the CPU pool: decoding a tenant's
histories on the worker's event loop held it from every other tenant's workflow tasks."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.client import WorkflowHistory

from memory.deletion.fingerprints import Matcher
from memory.deletion.residue import MAX_COPIES, Copy, scan_values

HISTORIES_PER_MATCH = 10
"""Histories fetched, then matched in one call of the pool (held in memory together; the activity heartbeats
while it waits)."""
_JOB = uuid.UUID(int=0)
"""The one job :func:`copies_in` matches for (:func:`scan_values` answers by job)."""


def serialized(history: WorkflowHistory) -> bytes:
    """A fetched history as bytes, to cross into the pool."""
    return History(events=history.events).SerializeToString()


def copies_in(histories: list[tuple[str, bytes]], matcher: Matcher) -> list[str]:
    """The labels of the histories (workflow id, serialized) that hold a copy of the job's texts."""
    copies: list[str] = []
    for workflow, data in histories:
        if len(copies) >= MAX_COPIES:
            break
        history = History()
        history.ParseFromString(data)
        place = Copy("temporal_history", "payloads", workflow)
        if scan_values(place, history_values(history.events), {_JOB: matcher})[_JOB]:
            copies.append(place.label)
    return copies


def history_values(events: Iterable[HistoryEvent]) -> Iterator[object]:
    """Every payload of a history (inputs, results, signals, failures' details), decoded: JSON when it is, else
    the bytes as text. Found by walking each event's message, so every event type is covered."""
    for event in events:
        yield from _payloads(event)


def _payloads(message: Message) -> Iterator[object]:
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            if isinstance(value, str):
                yield value
            elif not isinstance(value, bytes | int | float | bool):  # a repeated scalar field
                yield from (item for item in value if isinstance(item, str))
            continue
        if descriptor.message_type.GetOptions().map_entry:
            items = list(value.values())
        else:
            items = [value] if isinstance(value, Message) else list(value)
        for item in items:
            if isinstance(item, Payload):
                raw = item.data.decode("utf-8", errors="ignore")
                try:
                    yield json.loads(raw)
                except ValueError:
                    yield raw
            elif isinstance(item, Message):
                yield from _payloads(item)
            elif isinstance(item, str):
                yield item


__all__ = ["HISTORIES_PER_MATCH", "copies_in", "history_values", "serialized"]
