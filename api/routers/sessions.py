"""Sessions: open one, post its messages, read its state, window and summaries, commit a stage."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status

from api.deps import CurrentPrincipal, EngineDep
from api.schemas.common import replay_of
from api.schemas.sessions import (
    MessagesIn,
    MessagesOut,
    SessionCreatedOut,
    SessionIn,
    StoredEventOut,
)
from memory.db import tenant_session
from memory.events import request_digest
from memory.sessions import store
from memory.sessions.messages import ToolCall

router = APIRouter(tags=["sessions"])


@router.post("/sessions", status_code=status.HTTP_201_CREATED, responses=replay_of(SessionCreatedOut))
def open_session(
    body: SessionIn, principal: CurrentPrincipal, engine: EngineDep, response: Response
) -> SessionCreatedOut:
    """Open a session of the caller (idempotent by the client's ``session_id``; without one, a new id)."""
    new = store.NewSession(
        session_id=body.session_id or f"s-{uuid.uuid4().hex}",
        project_id=body.project_id,
        task_id=body.task_id,
        title=body.title,
    )
    digest = request_digest(body.model_dump(mode="json", exclude={"session_id"}))
    with tenant_session(engine, principal.tenant_id) as session:
        chat, created = store.open_session(session, principal, new, digest)
    if not created:
        response.status_code = status.HTTP_200_OK
    return SessionCreatedOut(session_id=chat.session_id, status=chat.status, replayed=not created)


@router.post("/sessions/{session_id}/messages", status_code=status.HTTP_201_CREATED, responses=replay_of(MessagesOut))
def post_messages(
    session_id: str, body: MessagesIn, principal: CurrentPrincipal, engine: EngineDep, response: Response
) -> MessagesOut:
    """Store up to 500 messages in one transaction, numbered in order; a replay returns the first result."""
    messages = [
        store.NewMessage(
            idempotency_key=m.idempotency_key,
            role=m.role,
            content=m.content,
            created_at=m.created_at,
            tool_calls=tuple(ToolCall(c.id, c.name, c.arguments) for c in m.tool_calls),
            tool_call_id=m.tool_call_id,
            context_refs=tuple(m.context_refs),
        )
        for m in body.messages
    ]
    digests = [request_digest(m.model_dump(mode="json")) for m in body.messages]
    with tenant_session(engine, principal.tenant_id) as session:
        stored = store.append_messages(session, principal, session_id, messages, digests)
    if all(s.replayed for s in stored):
        response.status_code = status.HTTP_200_OK
    return MessagesOut(
        events=[StoredEventOut(event_id=s.event_id, sequence_no=s.sequence_no, replayed=s.replayed) for s in stored],
        sequence_range={"from": min(s.sequence_no for s in stored), "to": max(s.sequence_no for s in stored)},
    )
