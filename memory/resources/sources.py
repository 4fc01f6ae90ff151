"""Where one resource type's records live, and the three questions the reader asks of them (seed 000 §4).

The reader (:mod:`memory.resources.reader`) knows declarations, access, ranking and pages; a
:class:`Source` knows one type's storage: the business records of ``resource_records``
(:class:`memory.resources.record_source.RecordSource`), or mnemo's own memories, sessions and tasks
(adapters of their own). Every method gets the request's :class:`Access` and the type's :class:`Grant`
and answers only the caller's own, live rows (another user's or tenant's, a forgotten or deleted one:
absent, exactly as a missing one):

- :meth:`Source.page` — ``list``: rows passing the typed filters, newest change first, after a keyset
  position;
- :meth:`Source.match` — ``search``: lexical candidates whose text comes ONLY from fields the grant
  reads (seed 000 §3.2: a word only in a forbidden field never makes a candidate);
- :meth:`Source.fetch` — the current rows of some ids, re-read from the source of truth: a candidate's
  state, version and data as they are now, not as the projection saw them.

A source never trims fields: it returns its rows' whole data (long fields only when asked), and the
reader keeps what the grant reads. Rows are :class:`SourceRow`, the same for every type, carrying what
the cross-resource ranker weighs besides relevance (state, confidence, time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from sqlalchemy import Select, SQLColumnExpression, literal, tuple_
from sqlalchemy.orm import Session

from memory.resources.access import Access, Grant
from memory.resources.declarations import Filter


class RowState(StrEnum):
    """What a row's state means to a ranker: an open todo is still to act on, a done one is history."""

    OPEN = "open"
    CLOSED = "closed"
    NONE = "none"
    """The type has no state (a contact, a transcript)."""
    WITHHELD = "withheld"
    """The caller may not read a field the state comes from (:mod:`memory.resources.derived`)."""


@dataclass(frozen=True)
class Lineage:
    """The declared fields each value a source derives for a row comes from (a todo's state from ``/status``, a
    memory's confidence from ``/confidence``). A value with none is the store's own metadata (a business record's
    version and time of change), not a field of the record."""

    state: tuple[str, ...] = ()
    confidence: tuple[str, ...] = ()
    updated_at: tuple[str, ...] = ()
    version: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceRow:
    """One record as its source holds it now."""

    resource: str
    record_id: str
    version: int
    updated_at: datetime
    data: dict[str, Any]
    """The record's data; its long fields are in it only when fetched ``whole`` (else absent, see ``long_fields``)."""
    long_fields: tuple[str, ...] = ()
    """Paths of long fields whose values live apart (the artifact store) and are absent from ``data`` unless whole."""
    state: RowState = RowState.NONE
    confidence: float = 1.0
    """How sure the source is of the row, in [0, 1]: a business record is a fact (1.0); a memory candidate less."""
    lineage: Lineage = Lineage()
    """Where ``state``, ``confidence``, ``updated_at`` and ``version`` come from: a caller is shown each one only if
    it reads every field of its lineage."""

    @property
    def ref(self) -> str:
        return f"{self.resource}:{self.record_id}"


class FilterOp(StrEnum):
    EQUALS = "eq"
    FROM = "from"
    """At or after (timestamps, numbers): inclusive."""
    BEFORE = "before"
    """Strictly before: ``from``/``before`` pages a time range without overlap."""


@dataclass(frozen=True)
class FilterClause:
    """One parsed, typed condition of a ``list``: a declared filter, an operator, a value of the filter's type
    (str, bool, int, float, or an aware datetime)."""

    filter: Filter
    op: FilterOp
    value: str | bool | int | float | datetime


@dataclass(frozen=True)
class Position:
    """A keyset position in newest-first order: rows strictly after it (older, or as old with a smaller id). Without
    ``updated_at`` when the caller may not read the time of change: its list is in id order alone."""

    updated_at: datetime | None
    record_id: str


Listed = TypeVar("Listed", bound=Select[Any])


def shows(grant: Grant, lineage: tuple[str, ...]) -> bool:
    """The one rule for every value derived from a record (issue 23 finding 5): the caller may know it — see it,
    be ranked or ordered by it — only if it may read every field it comes from."""
    return all(grant.reads(path) for path in lineage)


def newest_first(statement: Listed, updated_at: SQLColumnExpression[datetime], record_id: SQLColumnExpression[str],
                 after: Position | None, limit: int, *, grant: Grant, lineage: Lineage) -> Listed:
    """``statement`` in the order every ``list`` pages by — newest change first, then the larger id — strictly after
    ``after``, at most ``limit`` rows: the keyset condition and the order it must agree with, in one place. When
    ``updated_at`` comes from a field ``grant`` does not read, the order is the id's alone: an order by the time
    would tell the field."""
    if not shows(grant, lineage.updated_at):
        if after is not None:
            statement = statement.where(record_id < literal(after.record_id))
        return statement.order_by(record_id.desc()).limit(limit)
    if after is not None:
        statement = statement.where(tuple_(updated_at, record_id) < tuple_(literal(after.updated_at),
                                                                           literal(after.record_id)))
    return statement.order_by(updated_at.desc(), record_id.desc()).limit(limit)


@dataclass(frozen=True)
class Query:
    """A search query, tokenised once as the projection was (:func:`memory.text.search_terms`)."""

    text: str
    """Normalised (:func:`memory.text.normalize`): for trigram similarity."""
    terms: tuple[str, ...]
    """Its lexemes, stop words dropped, deduplicated."""


@dataclass(frozen=True)
class Candidate:
    """A record that matched, with its lexical evidence computed from readable fields only."""

    record_id: str
    coverage: float
    """Share of the query's terms found in the readable fields, in [0, 1]."""
    rank: float
    """``ts_rank`` summed over the readable fields, normalised to [0, 1) as rank / (rank + 1)."""
    fields: tuple[str, ...]
    """The declared paths (readable ones) that matched, best first: where the snippet is taken."""


class Source(Protocol):
    """One resource type's records. Implementations are stateless beyond their configuration."""

    @property
    def resource(self) -> str:
        """The declared type whose records this source holds."""
        ...

    def page(self, session: Session, access: Access, grant: Grant, filters: Sequence[FilterClause],
             after: Position | None, limit: int) -> list[SourceRow]:
        """Up to ``limit`` rows passing every clause, newest ``updated_at`` first (ties: larger id first), strictly
        after ``after``; long fields left out."""
        ...

    def match(self, session: Session, access: Access, grant: Grant, query: Query, limit: int) -> list[Candidate]:
        """Up to ``limit`` candidates, best first, whose matched text lies ONLY in fields ``grant`` reads."""
        ...

    def fetch(self, session: Session, access: Access, grant: Grant, ids: Sequence[str], *,
              whole: bool = False) -> Mapping[str, SourceRow]:
        """The current rows of ``ids`` (by id; a missing, foreign or forgotten one is absent), with the long fields
        ``grant`` reads read back when ``whole``."""
        ...
