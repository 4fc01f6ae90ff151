"""The audience on the projection row: the vector walk refuses other users' rows before joining them.

The HNSW walk streams a tenant's nearest rows and joined each one to its memory, for the hard filters
to refuse it when another user owns it: a user who sees 0.5 % of a million-memory tenant paid
hundreds of joins per result (290-338 ms p50, 720-865 ms p95, issue 28). ``memory_search.audience``
(:func:`memory.store.audience.audience`, as the postings of migration 0009 carry it) lets the walk
refuse them on the row it already reads. The hard filters still decide every row.

Online: the column is added empty (no rewrite), then filled in batches of :data:`BATCH` rows, each
committed on its own, so recall keeps answering and writers wait for one batch at most. Recall treats
a row without an audience as anyone's (the hard filters decide), so a half-filled table answers
exactly. Every filled row is rewritten, with its index entries (the HNSW one included).

Revision ID: 0033
Revises: 0032
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection, text

from migrations.rls import APP_ROLE

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

AUDIENCE = (
    "CASE WHEN m.space IN ('SYSTEM', 'TENANT') THEN ''"
    " WHEN m.space = 'SESSION' THEN 'SESSION:' || m.owner_id || '/' || coalesce(m.session_id, '')"
    " ELSE m.space || ':' || m.owner_id END"
)
"""``memory.store.audience.audience`` in SQL, as of this migration (the same as 0009's)."""

BATCH = 5_000
"""Rows filled per committed batch: a writer of one of them waits for that batch only."""

FILL = (
    "WITH batch AS (SELECT memory_id FROM memory_search WHERE tenant_id = :t"
    " AND (CAST(:after AS uuid) IS NULL OR memory_id > CAST(:after AS uuid))"
    " ORDER BY memory_id LIMIT :batch),"
    " filled AS (UPDATE memory_search s SET audience = " + AUDIENCE + " FROM batch, memories m"
    " WHERE s.tenant_id = :t AND s.memory_id = batch.memory_id AND m.tenant_id = s.tenant_id"
    " AND m.memory_id = s.memory_id AND m.version = s.version AND s.audience IS DISTINCT FROM " + AUDIENCE +
    " RETURNING 1)"
    " SELECT (SELECT memory_id FROM batch ORDER BY memory_id DESC LIMIT 1), (SELECT count(*) FROM filled)"
)
"""One batch of one tenant's rows after ``:after`` (by key): their audience from their memory version."""


def fill_audiences(connection: Connection, batch: int = BATCH) -> int:
    """Fill every projection row's audience, tenant by tenant, a committed batch at a time; returns the rows filled.

    ``connection`` is in autocommit mode, so each statement commits on its own; the tenant is set for the
    session (row-level security), and cleared at the end.
    """
    filled = 0
    tenants = connection.execute(text("SELECT tenant_id FROM tenants ORDER BY tenant_id")).scalars().all()
    try:
        for tenant in tenants:
            connection.execute(text("SELECT set_config('mnemo.tenant_id', :t, false)"), {"t": tenant})
            after: str | None = None
            while True:
                last, count = connection.execute(text(FILL), {"t": tenant, "after": after, "batch": batch}).one()
                filled += int(count)
                if last is None:
                    break
                after = str(last)
    finally:
        connection.execute(text("SELECT set_config('mnemo.tenant_id', '', false)"))
    return filled


def _scoped_view(columns: str) -> None:
    """``memory_search_scoped`` (migrations 0005, 0019) over ``columns``: the candidate statements read it."""
    op.execute("DROP VIEW memory_search_scoped")
    op.execute(f"CREATE VIEW memory_search_scoped AS SELECT {columns} FROM memory_search"
               " WHERE tenant_id = current_setting('mnemo.tenant_id', true)")
    op.execute(f"GRANT SELECT ON memory_search_scoped TO {APP_ROLE}")


VIEW_COLUMNS = ("tenant_id, memory_id, version, search_text, tokens, embedding, embedding_model, embedding_revision,"
                " source_revision")


def upgrade() -> None:
    op.execute("ALTER TABLE memory_search ADD COLUMN audience text")
    _scoped_view(VIEW_COLUMNS + ", audience")
    with op.get_context().autocommit_block():
        fill_audiences(op.get_bind())


def downgrade() -> None:
    _scoped_view(VIEW_COLUMNS)
    op.execute("ALTER TABLE memory_search DROP COLUMN audience")
