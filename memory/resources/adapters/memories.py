"""The ``memory`` resource: mnemo's own memories, their current versions only, read under the rules that
``GET /memories/{id}`` applies (:func:`memory.store.memories.readable_heads`: the scope wall, no superseded or deleted
version, no deletion barrier).

A search narrows with the memories' lexical projection (``memory_search.tokens``, whose text mixes key,
summaries, content and the day observed: :func:`memory.store.memory_text.lexical_text`) and then decides on the
readable fields alone (:func:`common.match_rows`): the projection only proposes, so a word only in a field the
grant does not read (or only in the day words) never makes a candidate.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Text, and_, bindparam, cast, func, literal, select, tuple_
from sqlalchemy.orm import Session

from memory.enums import Status
from memory.models import Memory, MemorySearch
from memory.resources.access import Access, Grant
from memory.resources.adapters.common import (
    Columns,
    TableSource,
    filter_conditions,
    match_rows,
    present,
    stamp,
    uuid_or_none,
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
from memory.store.memories import readable_heads
from memory.text import tsquery_any

PROPOSALS_PER_CANDIDATE = 8
"""How many readable matches a search ranks per candidate it may return (at least :data:`MIN_PROPOSALS`)."""
MIN_PROPOSALS = 400


def proposals_wanted(limit: int) -> int:
    """How many readable matches a search of ``limit`` candidates ranks (the newest that many)."""
    return max(MIN_PROPOSALS, PROPOSALS_PER_CANDIDATE * limit)

MEMORY_ID = cast(Memory.memory_id, Text)
COLUMNS: Columns = {
    "/category": Memory.category,
    "/space": Memory.space,
    "/status": Memory.status,
    "/key": Memory.key,
    "/stored_at": Memory.stored_at,
}
LINEAGE = Lineage(state=("/status", "/validity/effective_to", "/validity/expires_at"), confidence=("/confidence",),
                  updated_at=("/stored_at",), version=("/version",))
"""What :func:`state_of`, the confidence, the time of change and the version of a row come from."""


def data_of(memory: Memory) -> dict[str, Any]:
    """The memory as the ``memory`` declaration names it (absent values left out)."""
    validity = present(observed_at=stamp(memory.observed_at), effective_from=stamp(memory.effective_from),
                       effective_to=stamp(memory.effective_to), expires_at=stamp(memory.expires_at))
    return present(
        abstract=memory.abstract, overview=memory.overview, content=memory.content, key=memory.key,
        category=memory.category, space=memory.space, status=memory.status, confidence=memory.confidence,
        source_level=memory.source_level, version=memory.version, supersedes_version=memory.supersedes_version,
        project_id=memory.project_id, session_id=memory.session_id,
        source={"source_id": memory.source_id, "source_type": memory.source_type,
                "captured_at": stamp(memory.captured_at), "evidence_refs": list(memory.evidence_refs)},
        validity=validity, stored_at=stamp(memory.stored_at),
    )


def state_of(memory: Memory, now: datetime) -> RowState:
    """An expired or revoked memory, or one whose validity has ended, is history; any other has no state."""
    ended = any(moment is not None and moment <= now for moment in (memory.effective_to, memory.expires_at))
    if memory.status in (Status.EXPIRED.value, Status.REVOKED.value) or ended:
        return RowState.CLOSED
    return RowState.NONE


@dataclass
class MemorySource(TableSource):
    columns = COLUMNS

    def page(self, session: Session, access: Access, grant: Grant, filters: Sequence[FilterClause],
             after: Position | None, limit: int) -> list[SourceRow]:
        statement = newest_first(
            select(Memory).where(readable_heads(access.principal), *filter_conditions(self.columns, filters)),
            Memory.stored_at, MEMORY_ID, after, limit, grant=grant, lineage=LINEAGE)
        return self._rows(session, session.execute(statement).scalars())

    def match(self, session: Session, access: Access, grant: Grant, query: Query, limit: int) -> list[Candidate]:
        """The best ``limit`` of the newest :func:`proposals_wanted` memories that match in READABLE fields.

        The projection proposes newest first, batch by batch, until that many readable matches are found or none is
        left: a cap on proposals would let memories matching only in withheld fields crowd a readable match out, and
        whether it was found would tell what their withheld fields say."""
        if not query.terms:
            return []
        wanted = proposals_wanted(limit)
        proposals = (
            select(Memory)
            .join(MemorySearch, and_(MemorySearch.tenant_id == Memory.tenant_id,
                                     MemorySearch.memory_id == Memory.memory_id,
                                     MemorySearch.version == Memory.version))
            .where(readable_heads(access.principal),
                   MemorySearch.tokens.op("@@")(func.to_tsquery("simple", bindparam("tsquery", type_=Text))))
            .order_by(Memory.revision.desc(), Memory.memory_id.desc())
            .limit(wanted)
        )
        found: list[Candidate] = []
        after: tuple[int, uuid.UUID] | None = None
        while len(found) < wanted:
            batch = proposals if after is None else proposals.where(
                tuple_(Memory.revision, Memory.memory_id) < tuple_(literal(after[0]), literal(after[1])))
            memories = session.execute(batch, {"tsquery": tsquery_any(list(query.terms))}).scalars().all()
            if not memories:
                break
            after = (memories[-1].revision, memories[-1].memory_id)
            matched = {c.record_id: c for c in match_rows(session, self.declaration, grant, query.terms,
                                                           [(str(m.memory_id), data_of(m)) for m in memories],
                                                           len(memories))}
            # Newest first, never more than wanted: where a batch ends (how many withheld matches fill it) decides
            # nothing.
            found += [matched[str(m.memory_id)] for m in memories if str(m.memory_id) in matched][:wanted - len(found)]
        return sorted(found, key=lambda c: (-c.coverage, -c.rank, c.record_id))[:limit]

    def fetch(self, session: Session, access: Access, grant: Grant, ids: Sequence[str], *,
              whole: bool = False) -> Mapping[str, SourceRow]:
        del grant, whole  # a memory has no long field
        parsed = [memory_id for memory_id in map(uuid_or_none, ids) if memory_id is not None]
        if not parsed:
            return {}
        statement = select(Memory).where(readable_heads(access.principal), Memory.memory_id.in_(parsed))
        return {row.record_id: row for row in self._rows(session, session.execute(statement).scalars())}

    def _rows(self, session: Session, memories: Any) -> list[SourceRow]:
        now = session.execute(select(func.now())).scalar_one().astimezone(UTC)
        return [
            SourceRow(resource=self.resource, record_id=str(memory.memory_id), version=memory.version,
                      updated_at=memory.stored_at, data=data_of(memory), state=state_of(memory, now),
                      confidence=memory.confidence, lineage=LINEAGE)
            for memory in memories
        ]

