"""Source events: messages, tool results and task events, idempotent by key."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import CurrentPrincipal, EngineDep
from api.schemas.common import replay_of
from api.schemas.events import EventIn, EventOut
from memory.db import tenant_session
from memory.store.events import NewEvent, record_event, request_digest

router = APIRouter(tags=["events"])


@router.post(
    "/memory-events",
    status_code=status.HTTP_201_CREATED,
    responses=replay_of(EventOut),
)
def submit_event(body: EventIn, principal: CurrentPrincipal, engine: EngineDep, response: Response) -> EventOut:
    """Store an event once. Replaying the same body returns the first result (200); another body is a 409."""
    new = NewEvent(
        idempotency_key=body.idempotency_key,
        kind=body.kind,
        payload=body.payload,
        occurred_at=body.occurred_at,
        session_id=body.session_id,
    )
    with tenant_session(engine, principal.tenant_id) as session:
        recorded = record_event(session, principal, new, request_digest(body.model_dump(mode="json")))
    if recorded.replayed:
        response.status_code = status.HTTP_200_OK
    event = recorded.event
    return EventOut(
        event_id=event.event_id,
        idempotency_key=event.idempotency_key,
        kind=event.kind,
        session_id=event.session_id,
        occurred_at=event.occurred_at,
        stored_at=event.stored_at,
        revision=event.revision,
        replayed=recorded.replayed,
    )
