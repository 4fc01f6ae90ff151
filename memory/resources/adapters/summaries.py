"""The ``session_summary`` resource: the latest readable summary version of each of the caller's sessions,
named by the session's id, as ``GET /sessions/{id}/summaries/latest`` shows it.

The session must be the caller's (:func:`memory.sessions.store.own_sessions`) and the version readable
(:func:`memory.sessions.archive.summary_readable`: not scrubbed, citing no event under a deletion barrier);
a version hidden by a deletion leaves the previous readable one, as the REST route does. A new commit makes
a new version, so the row's version is the summary's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.selectable import Select

from memory.resources.access import Access, Grant
from memory.resources.adapters.common import (
    Columns,
    TableSource,
    filter_conditions,
    match_rows,
    present,
    stamp,
)
from memory.resources.sources import Candidate, FilterClause, Lineage, Position, Query, SourceRow, newest_first
from memory.sessions.archive import summary_readable
from memory.sessions.models import ChatSession, SessionSummary
from memory.sessions.store import own_sessions

LINEAGE = Lineage(updated_at=("/created_at",), version=("/version",))
"""A summary version's time of change is when it was made, and its version a field of its own."""
SECTIONS = ("goal", "facts", "decisions", "constraints", "completed", "pending", "unknowns", "errors")


def columns_of(summary: Any) -> Columns:
    return {"/reason": summary.reason, "/created_at": summary.created_at}


def data_of(summary: SessionSummary) -> dict[str, Any]:
    """The version as the ``session_summary`` declaration names it (absent values left out)."""
    sections = {name: [present(text=item["text"], source_event_ids=list(item["source_event_ids"]),
                               key=item.get("key"))
                       for item in summary.body.get(name, [])]
                for name in SECTIONS}
    return present(
        session=f"session:{summary.session_id}", version=summary.version, reason=summary.reason,
        commit_id=summary.commit_id,
        covered={"from_sequence": summary.from_sequence, "to_sequence": summary.to_sequence},
        abstract=summary.abstract, overview=summary.overview, **sections, created_at=stamp(summary.created_at),
    )


@dataclass
class SummarySource(TableSource):
    columns = columns_of(SessionSummary)

    def page(self, session: Session, access: Access, grant: Grant, filters: Sequence[FilterClause],
             after: Position | None, limit: int) -> list[SourceRow]:
        latest = _latest(access)
        statement = newest_first(select(latest).where(*filter_conditions(columns_of(latest), filters)),
                                 latest.created_at, latest.session_id, after, limit, grant=grant, lineage=LINEAGE)
        return [self._row(summary) for summary in session.execute(statement).scalars()]

    def match(self, session: Session, access: Access, grant: Grant, query: Query, limit: int) -> list[Candidate]:
        # No projection: the caller's latest summaries are read and their readable fields matched.
        summaries = session.execute(select(_latest(access))).scalars()
        rows = [(summary.session_id, data_of(summary)) for summary in summaries]
        return match_rows(session, self.declaration, grant, query.terms, rows, limit)

    def fetch(self, session: Session, access: Access, grant: Grant, ids: Sequence[str], *,
              whole: bool = False) -> Mapping[str, SourceRow]:
        del grant, whole  # a summary has no long field
        if not ids:
            return {}
        latest = _latest(access, list(ids))
        return {summary.session_id: self._row(summary) for summary in session.execute(select(latest)).scalars()}

    def _row(self, summary: SessionSummary) -> SourceRow:
        return SourceRow(resource=self.resource, record_id=summary.session_id, version=summary.version,
                         updated_at=summary.created_at, data=data_of(summary), lineage=LINEAGE)


def _latest(access: Access, session_ids: list[str] | None = None) -> Any:
    """The newest readable version of each of the caller's sessions (of ``session_ids`` only, if given)."""
    statement: Select[Any] = (
        select(SessionSummary)
        .join(ChatSession, and_(ChatSession.tenant_id == SessionSummary.tenant_id,
                                ChatSession.user_id == SessionSummary.user_id,
                                ChatSession.session_id == SessionSummary.session_id))
        .where(own_sessions(access.principal), summary_readable())
        .ext(distinct_on(SessionSummary.session_id))
        .order_by(SessionSummary.session_id, SessionSummary.version.desc())
    )
    if session_ids is not None:
        statement = statement.where(SessionSummary.session_id.in_(session_ids))
    return aliased(SessionSummary, statement.subquery("latest"))
