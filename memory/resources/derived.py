"""What one caller may know of a source row (issue 23 finding 5, seed 000 §3.2): every part of a list, search or
read result is built from a :class:`Shown`, never from the :class:`SourceRow` itself.

A row carries its data and values derived from it — a state (a todo's ``/status``), a confidence (a memory's
``/confidence``), a time of change and a version (a task's ``/updated_at`` and ``/state_version``). The data is cut to
the readable fields once, here; each derived value passes :func:`memory.resources.sources.shows` against the fields
it comes from (the row's :class:`~memory.resources.sources.Lineage`) or is withheld: shown as ``withheld`` / null,
weighed as nothing by the ranker, never an order. So records that differ only in fields the caller may not read give
it the same result, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.resources.access import Grant
from memory.resources.fields import readable
from memory.resources.sources import RowState, SourceRow, shows


@dataclass(frozen=True)
class Shown:
    """A row as the caller may know it."""

    resource: str
    record_id: str
    data: dict[str, Any]
    """The readable fields only (long ones absent unless fetched whole)."""
    long_fields: tuple[str, ...]
    """The readable long fields left out of ``data``."""
    state: RowState
    confidence: float | None
    updated_at: datetime | None
    version: int | None

    @property
    def ref(self) -> str:
        return f"{self.resource}:{self.record_id}"

    def mark(self) -> int | str:
        """What a read's cursor compares to notice the record changed between pages: the version when the caller may
        know it, else a digest of the readable data (so a change of a withheld field alone is no change to it)."""
        if self.version is not None:
            return self.version
        encoded = json.dumps(self.data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(encoded.encode("utf-8")).hexdigest()[:24]


def shown(row: SourceRow, grant: Grant) -> Shown:
    lineage = row.lineage
    return Shown(
        resource=row.resource, record_id=row.record_id, data=readable(row.data, grant.fields),
        long_fields=tuple(path for path in row.long_fields if grant.reads(path)),
        state=row.state if shows(grant, lineage.state) else RowState.WITHHELD,
        confidence=row.confidence if shows(grant, lineage.confidence) else None,
        updated_at=row.updated_at if shows(grant, lineage.updated_at) else None,
        version=row.version if shows(grant, lineage.version) else None,
    )
