"""Source events: messages, tool results and task events, idempotent by key; one at a time or in a batch."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status

from api.admission import batch_slots
from api.deps import CurrentPrincipal, EngineDep
from api.schemas.batches import BatchIn, batch_model, item_model
from api.schemas.common import replay_of
from api.schemas.events import EventIn, EventOut
from api.services.batches import batch_answer, parse_items
from memory.db import tenant_session
from memory.errors import MnemoError
from memory.store.events import NewEvent, record_event, record_events, request_digest

router = APIRouter(tags=["events"])

EventItemOut = item_model(EventOut)
EventBatchOut = batch_model(EventItemOut)


def _item(body: EventIn) -> tuple[NewEvent, str]:
    return body.new(), request_digest(body.model_dump(mode="json"))


@router.post(
    "/memory-events",
    status_code=status.HTTP_201_CREATED,
    responses=replay_of(EventOut),
)
def submit_event(body: EventIn, principal: CurrentPrincipal, engine: EngineDep, response: Response) -> EventOut:
    """Store an event once. Replaying the same body returns the first result (200); another body is a 409."""
    with tenant_session(engine, principal.tenant_id) as session:
        recorded = record_event(session, principal, *_item(body))
    if recorded.replayed:
        response.status_code = status.HTTP_200_OK
    return EventOut.of(recorded)


@router.post("/memory-events:batch", response_model=EventBatchOut, response_model_exclude_unset=True)
def submit_events(body: BatchIn, principal: CurrentPrincipal, engine: EngineDep, request: Request) -> dict[str, Any]:
    """Store up to 500 events in one transaction, each as ``POST /memory-events`` would: per item, in order,
    ``committed``, ``replayed`` (the first result) or ``error`` (that item alone; nothing of it is stored)."""
    items = parse_items(body.items, EventIn, _item)
    with batch_slots(request.app.state, "write", principal.tenant_id, len(items)), \
            tenant_session(engine, principal.tenant_id) as session:
        recorded = record_events(session, principal, items)
    return batch_answer(EventItemOut, [r if isinstance(r, MnemoError) else (EventOut.of(r), r.replayed)
                                       for r in recorded])
