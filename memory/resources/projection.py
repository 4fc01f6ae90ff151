"""The search projection of a record (seed 000 §4.1): written in the record's transaction, one row per
declared search field, so the text a search matches can be built from the fields a run may read only.

The text is normalised and tokenised as memories' is (:mod:`memory.text`: NFKC, casefold, words and CJK
bigrams, English stems), so a query meets records and memories with the same lexemes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from memory.errors import InvalidInput
from memory.resources import pointers
from memory.resources.declarations import Declaration
from memory.resources.models import ResourceRecord, ResourceSearch
from memory.text import lexemes, normalize

TSVECTOR_TOO_LONG = "54000"
"""PostgreSQL's program_limit_exceeded, which ``to_tsvector`` raises past 1 MB of lexemes and positions."""


def field_texts(declaration: Declaration, data: dict[str, Any]) -> dict[str, str]:
    """Per declared search field, the text of its values in ``data`` (array items one per line); a field
    that is absent or empty has none."""
    texts: dict[str, str] = {}
    for path in declaration.search_fields:
        text = "\n".join(value for _, value in pointers.values_at(data, path))
        if text.strip():
            texts[path] = text
    return texts


def write_record_projection(session: Session, record: ResourceRecord, declaration: Declaration,
                            data: dict[str, Any]) -> None:
    """Replace the record's projection rows with those of ``data`` (its whole data, long fields included)."""
    key = {"tenant_id": record.tenant_id, "owner_id": record.owner_id, "resource": record.resource,
           "record_id": record.record_id}
    session.execute(delete(ResourceSearch).filter_by(**key))
    for path, text in field_texts(declaration, data).items():
        row = insert(ResourceSearch).values(
            **key, field_path=path, version=record.version, search_text=normalize(text),
            tokens=func.to_tsvector("simple", " ".join(lexemes(text))), source_revision=record.revision,
        )
        try:
            with session.begin_nested():
                session.execute(row)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) != TSVECTOR_TOO_LONG:
                raise
            raise InvalidInput(
                f"{path} has more distinct words than one search index entry holds (1 MB of lexemes);"
                " split the record or shorten the field",
                code="field_too_large_to_index",
                details={"path": path},
            ) from exc
