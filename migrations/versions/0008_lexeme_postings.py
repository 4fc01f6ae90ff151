"""Full-text postings in a B-tree, newest first: the full-text source stops after the matches it needs.

A GIN bitmap scan reads every posting of every query term before it returns a row, and its
postings are table-wide: at a million memories a query with a common term ("用户", "user")
read ~390,000 postings, ~100 ms, whatever the tenant or the limit. ``memory_lexemes`` holds
one row per lexeme of each projection row's ``tokens`` (exactly ``tsvector_to_array(tokens)``),
keyed (tenant, lexeme, revision, memory): a query walks each term's newest postings in its
own tenant, and stops once enough of them pass the hard filters. The GIN index stays for
what must see every match (the explain counts, deletion verification).

Rows are written and deleted with their projection row, in its transaction
(``memory.store.projection``); the second index serves those per-memory deletes and deletion
verification. No foreign key: its check, one trigger call per posting, doubled the cost of
writing them (~20 per memory).

Revision ID: 0008
Revises: 0007
"""

from alembic import op

from migrations.rls import isolate_by_tenant, per_tenant

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BACKFILL = (
    "INSERT INTO memory_lexemes (tenant_id, lexeme, revision, memory_id, version)"
    " SELECT s.tenant_id, lexeme, s.source_revision, s.memory_id, s.version"
    " FROM memory_search s, unnest(tsvector_to_array(s.tokens)) AS lexeme WHERE s.tenant_id = :t"
)
"""The projection's lexemes of one tenant, as :func:`memory.store.projection.write_projection` derives them."""


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE memory_lexemes (
            tenant_id text NOT NULL,
            lexeme text NOT NULL,
            revision bigint NOT NULL,
            memory_id uuid NOT NULL,
            version integer NOT NULL,
            CONSTRAINT memory_lexemes_pkey PRIMARY KEY (tenant_id, lexeme, revision, memory_id) INCLUDE (version)
        );
        CREATE INDEX memory_lexemes_memory ON memory_lexemes (tenant_id, memory_id);
        """
    )
    isolate_by_tenant("memory_lexemes")
    # Writers of the projection wait until the postings are complete (readers go on): a projection row
    # written or deleted by a running older version during the backfill would otherwise leave its
    # postings missing or stale.
    op.execute("LOCK TABLE memory_search IN SHARE MODE")
    per_tenant(BACKFILL)


def downgrade() -> None:
    op.execute("DROP TABLE memory_lexemes")
