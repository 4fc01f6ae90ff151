"""Full-text postings split by audience: a caller walks only the postings of memories they may see.

Migration 0008 keyed postings (tenant, lexeme, revision, memory). A user with few memories in a
large tenant then walked the other users' postings of a common word one by one, each joined to
its memory and refused by the hard filters, before reaching their own: ~0.5 s a query for a user
with 0.5 % of a million-memory tenant, 6.8 s for one query, and seconds for a user with none.
The key now starts with the memory's audience (``memory.store.audience``): '' for a shared (SYSTEM,
TENANT) memory, ``SPACE:owner`` for a personal one, ``SESSION:owner/session`` for a session
memory. The postings are derived data, so the table is rebuilt from the projection rows, beside the old
one, and swapped in at the end.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

from migrations.rls import isolate_by_tenant, per_tenant

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

AUDIENCE = (
    "CASE WHEN m.space IN ('SYSTEM', 'TENANT') THEN ''"
    " WHEN m.space = 'SESSION' THEN 'SESSION:' || m.owner_id || '/' || coalesce(m.session_id, '')"
    " ELSE m.space || ':' || m.owner_id END"
)
"""``memory.store.audience.audience`` in SQL, as of this migration."""

BACKFILL = (
    "INSERT INTO {table} (tenant_id, audience, lexeme, revision, memory_id, version)"
    f" SELECT s.tenant_id, {AUDIENCE}, lexeme, s.source_revision, s.memory_id, s.version"
    " FROM memory_search s"
    " JOIN memories m ON m.tenant_id = s.tenant_id AND m.memory_id = s.memory_id AND m.version = s.version,"
    " unnest(tsvector_to_array(s.tokens)) AS lexeme WHERE s.tenant_id = :t"
)
"""One tenant's postings, as :func:`memory.store.projection.write_projection` derives them (``{table}``: where to)."""

BACKFILL_0008 = (
    "INSERT INTO {table} (tenant_id, lexeme, revision, memory_id, version)"
    " SELECT s.tenant_id, lexeme, s.source_revision, s.memory_id, s.version"
    " FROM memory_search s, unnest(tsvector_to_array(s.tokens)) AS lexeme WHERE s.tenant_id = :t"
)

REBUILT = "memory_lexemes_rebuilt"


def _rebuild(columns: str, key: str, backfill: str) -> None:
    """A new postings table built beside the old one, then swapped in: recall keeps reading the old one meanwhile.

    Writers of the projection wait until the swap (readers go on), as in 0008: a projection row written
    or deleted by a running older version during the backfill would otherwise leave its postings missing
    or stale.
    """
    op.execute("LOCK TABLE memory_search IN SHARE MODE")
    op.execute(
        f"""
        CREATE TABLE {REBUILT} (
            {columns},
            CONSTRAINT {REBUILT}_pkey PRIMARY KEY ({key}) INCLUDE (version)
        );
        CREATE INDEX {REBUILT}_memory ON {REBUILT} (tenant_id, memory_id);
        """
    )
    isolate_by_tenant(REBUILT)
    per_tenant(backfill.format(table=REBUILT))
    op.execute(
        f"""
        DROP TABLE memory_lexemes;
        ALTER TABLE {REBUILT} RENAME TO memory_lexemes;
        ALTER TABLE memory_lexemes RENAME CONSTRAINT {REBUILT}_pkey TO memory_lexemes_pkey;
        ALTER INDEX {REBUILT}_memory RENAME TO memory_lexemes_memory;
        """
    )
    # Statistics now, not when autovacuum gets to it: the walks are planned from them from the first query.
    op.execute("ANALYZE memory_lexemes")


def upgrade() -> None:
    _rebuild(
        "tenant_id text NOT NULL, audience text NOT NULL, lexeme text NOT NULL, revision bigint NOT NULL,"
        " memory_id uuid NOT NULL, version integer NOT NULL",
        "tenant_id, audience, lexeme, revision, memory_id",
        BACKFILL,
    )


def downgrade() -> None:
    _rebuild(
        "tenant_id text NOT NULL, lexeme text NOT NULL, revision bigint NOT NULL, memory_id uuid NOT NULL,"
        " version integer NOT NULL",
        "tenant_id, lexeme, revision, memory_id",
        BACKFILL_0008,
    )
