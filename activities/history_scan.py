"""The residue scan of mnemo's own workflow histories: their payloads decoded and matched against the fingerprints
of every job a round verifies. Fetched on the activity's event loop, from the round's thread (:func:`fetcher`);
decoded and matched in the CPU pool (:func:`copies_in`, a pure function of serialized histories): decoding a
tenant's histories on the worker's event loop held it from every other tenant's workflow tasks."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterable, Iterator

from google.protobuf.message import Message
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from memory import offload
from memory.deletion.fingerprints import Matcher
from memory.deletion.residue import MAX_COPIES, Copy, scan_values

HISTORIES_PER_MATCH = 10
"""Histories fetched, then matched in one call of the pool (held in memory together; the activity heartbeats
while it waits)."""


def serialized(history: WorkflowHistory) -> bytes:
    """A fetched history as bytes, to cross into the pool."""
    return History(events=history.events).SerializeToString()


def copies_in(histories: list[tuple[str, bytes]], found: dict[uuid.UUID, Matcher], own: dict[uuid.UUID, str]
              ) -> dict[uuid.UUID, list[str]]:
    """Per job, the labels of the histories (workflow id, serialized) that hold a copy of its texts; a job's own
    workflow (``own``) is not matched for that job: it carries ids and counts only."""
    copies: dict[uuid.UUID, list[str]] = {job_id: [] for job_id in found}
    for workflow, data in histories:
        looking = {job_id: matcher for job_id, matcher in found.items()
                   if own.get(job_id) != workflow and len(copies[job_id]) < MAX_COPIES}
        if not looking:
            continue
        history = History()
        history.ParseFromString(data)
        place = Copy("temporal_history", "payloads", workflow)
        for job_id, held in scan_values(place, history_values(history.events), looking).items():
            if held:
                copies[job_id].append(place.label)
    return copies


Fetch = Callable[[list[str]], list[tuple[str, bytes]]]
"""Fetches these workflows' histories (serialized; a missing one left out), from a thread: :func:`fetcher`."""
FETCH_PATIENCE_SECONDS = 120.0
"""The longest a scan waits for one batch of histories: past it (Temporal unreachable, the worker stopping) the
scan fails and its activity is retried, never a thread blocked for ever with its transaction open."""


async def fetch_histories(client: Client, ids: list[str]) -> list[tuple[str, bytes]]:
    fetched: list[tuple[str, bytes]] = []
    for workflow in ids:
        try:
            history = await client.get_workflow_handle(workflow).fetch_history()
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:  # retention removed it, or it never started
                continue
            raise
        fetched.append((workflow, serialized(history)))
    return fetched


def fetcher() -> Fetch:
    """For the current activity: a :data:`Fetch` that a thread calls, run on the activity's event loop."""
    client, loop = activity.client(), asyncio.get_running_loop()

    def fetch(ids: list[str]) -> list[tuple[str, bytes]]:
        return asyncio.run_coroutine_threadsafe(fetch_histories(client, ids), loop).result(FETCH_PATIENCE_SECONDS)

    return fetch


def history_copies(fetch: Fetch, ids: list[str], found: dict[uuid.UUID, Matcher], own: dict[uuid.UUID, str]
                   ) -> dict[uuid.UUID, list[str]]:
    """The residue scan of these workflow histories, per job, from a thread: fetched a few at a time, decoded and
    matched in the CPU pool (never on the worker's event loop, which runs every tenant's workflow tasks)."""
    copies: dict[uuid.UUID, list[str]] = {job_id: [] for job_id in found}
    for start in range(0, len(ids), HISTORIES_PER_MATCH):
        fetched = fetch(ids[start : start + HISTORIES_PER_MATCH])
        for job_id, labels in offload.run(copies_in, fetched, found, own).items():
            copies[job_id] += labels
        if all(len(labels) >= MAX_COPIES for labels in copies.values()):
            break
    return {job_id: labels[:MAX_COPIES] for job_id, labels in copies.items()}


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


__all__ = ["HISTORIES_PER_MATCH", "Fetch", "copies_in", "fetcher", "history_copies", "history_values", "serialized"]
