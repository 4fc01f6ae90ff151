"""The ``session`` resource: the caller's conversations, read under the rules of ``GET /sessions/{id}``
(:func:`memory.sessions.store.own_sessions`: their own with their key's agent, not purged, no deletion barrier).

A session is shown by its title, or else the first line of its first live user message, so a list of
untitled sessions still says what each was about. Its messages themselves are not a field: the curated
views of a conversation are its summary (the ``session_summary`` resource, each sentence with its source
events) and ``GET /sessions/{id}/window``; raw messages carry tool arguments and results, and each has a
deletion barrier of its own that every page would have to re-apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, Text, func, literal, select
from sqlalchemy.orm import Session

from memory.models import MemoryEvent
from memory.resources.access import Access, Grant
from memory.resources.adapters.common import (
    Columns,
    TableSource,
    filter_conditions,
    match_rows,
    present,
    stamp,
)
from memory.resources.sources import (
    Candidate,
    FilterClause,
    Lineage,
    Position,
    Query,
    RowState,
    SourceRow,
    newest_first,
)
from memory.sessions.archive import summary_readable
from memory.sessions.models import ChatSession, SessionSummary
from memory.sessions.store import message_live, own_sessions

TITLE_CHARS = 200
"""A first request standing in for a title is cut to its first line, at most this many characters."""
ACTIVE = "active"

UPDATED_AT = func.coalesce(ChatSession.last_message_at, ChatSession.created_at)
COLUMNS: Columns = {
    "/status": ChatSession.status,
    "/project_id": ChatSession.project_id,
    "/task": literal("task:", Text) + ChatSession.task_id,
    "/updated_at": UPDATED_AT,
}
LINEAGE = Lineage(state=("/status",), updated_at=("/updated_at",), version=("/message_count", "/committed_through"))
"""What a row's state, time of change and version (messages and commits counted) come from."""

_FIRST_REQUEST = (
    select(MemoryEvent.payload["content"].astext)
    .where(MemoryEvent.tenant_id == ChatSession.tenant_id, MemoryEvent.user_id == ChatSession.user_id,
           MemoryEvent.session_id == ChatSession.session_id, MemoryEvent.sequence_no.is_not(None),
           MemoryEvent.payload["role"].astext == "user", message_live())
    .order_by(MemoryEvent.sequence_no)
    .limit(1)
    .correlate(ChatSession)
    .scalar_subquery()
)
_HAS_SUMMARY = (
    select(SessionSummary.version)
    .where(SessionSummary.tenant_id == ChatSession.tenant_id, SessionSummary.user_id == ChatSession.user_id,
           SessionSummary.session_id == ChatSession.session_id, summary_readable())
    .correlate(ChatSession)
    .exists()
)


def title_of(chat: ChatSession, first_request: str | None) -> str:
    if chat.title:
        return chat.title
    line = (first_request or "").strip().split("\n", 1)[0].strip()
    return line[:TITLE_CHARS] if line else f"session {chat.session_id}"


def data_of(chat: ChatSession, first_request: str | None, has_summary: bool) -> dict[str, Any]:
    """The session as the ``session`` declaration names it (absent values left out)."""
    return present(
        title=title_of(chat, first_request), status=chat.status, agent_id=chat.agent_id, project_id=chat.project_id,
        task=f"task:{chat.task_id}" if chat.task_id else None,
        summary=f"session_summary:{chat.session_id}" if has_summary else None,
        created_at=stamp(chat.created_at), last_message_at=stamp(chat.last_message_at),
        updated_at=stamp(chat.last_message_at or chat.created_at),
        message_count=chat.next_sequence - 1, committed_through=chat.committed_through,
    )


@dataclass
class SessionSource(TableSource):
    columns = COLUMNS

    def page(self, session: Session, access: Access, grant: Grant, filters: Sequence[FilterClause],
             after: Position | None, limit: int) -> list[SourceRow]:
        statement = newest_first(self._select(access).where(*filter_conditions(self.columns, filters)),
                                 UPDATED_AT, ChatSession.session_id, after, limit, grant=grant, lineage=LINEAGE)
        return [self._row(found) for found in session.execute(statement)]

    def match(self, session: Session, access: Access, grant: Grant, query: Query, limit: int) -> list[Candidate]:
        # No projection: the caller's own sessions are read and their readable fields matched (common.match_rows).
        rows = [self._row(found) for found in session.execute(self._select(access))]
        return match_rows(session, self.declaration, grant, query.terms, [(r.record_id, r.data) for r in rows], limit)

    def fetch(self, session: Session, access: Access, grant: Grant, ids: Sequence[str], *,
              whole: bool = False) -> Mapping[str, SourceRow]:
        del grant, whole  # a session has no long field
        if not ids:
            return {}
        statement = self._select(access).where(ChatSession.session_id.in_(list(ids)))
        return {row.record_id: row for row in map(self._row, session.execute(statement))}

    def _select(self, access: Access) -> Any:
        return select(ChatSession, _FIRST_REQUEST.label("first_request"), _HAS_SUMMARY.label("has_summary")).where(
            own_sessions(access.principal))

    def _row(self, found: Row[Any]) -> SourceRow:
        chat: ChatSession = found.ChatSession
        # Every message and every commit changes what the session shows: together they count its changes.
        version = chat.next_sequence + chat.committed_through
        return SourceRow(resource=self.resource, record_id=chat.session_id, version=version,
                         updated_at=chat.last_message_at or chat.created_at,
                         data=data_of(chat, found.first_request, bool(found.has_summary)),
                         state=RowState.OPEN if chat.status == ACTIVE else RowState.CLOSED, lineage=LINEAGE)
