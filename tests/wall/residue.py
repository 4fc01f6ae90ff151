"""The residue scan, independent of the product: which tables and columns hold text is read from
PostgreSQL's catalog, never from mnemo's code (nothing of memory/deletion/* is imported here), and every row
of every table is searched, as the superuser (no row-level security), for the deleted texts' markers.

Markers are lower-case ASCII words of letters and digits ending in a digit, so a copy is found whatever
layer holds it: verbatim text, JSON, a trigram text, a ``tsvector`` (stemming leaves such a word alone).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

# Every type a text can hide in; a vector or a number cannot hold one.
_TEXT_TYPES = {"text", "character varying", "character", "json", "jsonb", "tsvector", "ARRAY", "xml", "name"}


@dataclass(frozen=True)
class Copy:
    """One remaining copy of a marker: where it is."""

    table: str
    column: str
    row: str
    marker: str

    def __str__(self) -> str:
        return f"{self.table}.{self.column} row {self.row}: {self.marker}"


def _columns(conn: psycopg.Connection[tuple[object, ...]]) -> dict[str, list[tuple[str, str]]]:
    rows = conn.execute(
        "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
        "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position"
    ).fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in rows:
        if data_type in _TEXT_TYPES or data_type == "bytea":
            tables.setdefault(str(table), []).append((str(column), str(data_type)))
    return tables


def _as_text(column: str, data_type: str) -> sql.Composable:
    if data_type == "bytea":  # escape form keeps printable ASCII as is
        return sql.SQL("lower(encode({}, 'escape'))").format(sql.Identifier(column))
    return sql.SQL("lower({}::text)").format(sql.Identifier(column))


def scan_database(conninfo: str, markers: Iterable[str]) -> list[Copy]:
    """Every copy of any of ``markers`` in any text-bearing column of any table."""
    patterns = sorted({f"%{marker.lower()}%" for marker in markers})
    if not patterns:
        return []
    copies: list[Copy] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for table, columns in _columns(conn).items():
            values = [_as_text(column, data_type) for column, data_type in columns]
            query = sql.SQL("SELECT ctid::text, {values} FROM {table} WHERE {where}").format(
                values=sql.SQL(", ").join(values), table=sql.Identifier(table),
                where=sql.SQL(" OR ").join(sql.SQL("{} LIKE ANY(%(p)s)").format(v) for v in values))
            for ctid, *texts in conn.execute(query, {"p": patterns}).fetchall():
                for (column, _), text in zip(columns, texts, strict=True):
                    copies.extend(Copy(table, column, str(ctid), pattern.strip("%")) for pattern in patterns
                                  if text is not None and pattern.strip("%") in str(text))
    return copies


def scan_files(root: Path, markers: Iterable[str]) -> list[Copy]:
    """Every file under ``root`` holding a marker (as UTF-8 bytes, any case)."""
    wanted = [marker.lower().encode() for marker in markers]
    copies: list[Copy] = []
    if not wanted:
        return copies
    for path in root.rglob("*"):
        if path.is_file():
            content = path.read_bytes().lower()
            copies.extend(Copy("file", str(path.relative_to(root)), "-", m.decode()) for m in wanted if m in content)
    return copies
