"""The vector column's dimension follows the configured model: one column for any dimension, an index per dimension.

``memory_search.embedding`` was ``vector(384)``, the bundled model's. It becomes ``vector`` (no fixed
dimension; removing the type modifier rewrites no row), and the HNSW index becomes a partial expression
index per dimension (``memory_search_embedding_<n>``). Configuring a model of another dimension then
needs no clearing and no rewrite: its own index is built concurrently
(:func:`memory.embedders.schema.ensure_vector_index`, run by :func:`migrations.upgrade` right after this
migration, for 384 and for the configured model's dimension, so no lock is held while one builds), the backlog sweep
re-embeds each memory (the model id is part of a vector's identity), and recall reads only the
configured model's vectors meanwhile. The scoped view (migration 0005) depends on the column's type,
so it is dropped and made again, unchanged.

Downgrade keeps only 384-dimensional vectors (others are cleared, so the sweep embeds those memories
again) and restores the fixed column and its index.

Revision ID: 0019
Revises: 0018
"""

from alembic import op

from migrations.rls import APP_ROLE, per_tenant

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

SCOPED_VIEW = """
    CREATE VIEW memory_search_scoped AS
        SELECT tenant_id, memory_id, version, search_text, tokens, embedding, embedding_model,
               embedding_revision, source_revision
        FROM memory_search
        WHERE tenant_id = current_setting('mnemo.tenant_id', true);
"""


def upgrade() -> None:
    op.execute("DROP VIEW memory_search_scoped")
    op.execute("DROP INDEX memory_search_embedding")
    op.execute("ALTER TABLE memory_search ALTER COLUMN embedding TYPE vector")
    op.execute(SCOPED_VIEW)
    op.execute(f"GRANT SELECT ON memory_search_scoped TO {APP_ROLE}")


def downgrade() -> None:
    op.execute("DROP VIEW memory_search_scoped")
    op.execute(
        """
        DO $$
        DECLARE name text;
        BEGIN
            FOR name IN SELECT indexname FROM pg_indexes
                        WHERE tablename = 'memory_search' AND indexname ~ '^memory_search_embedding_[0-9]+$' LOOP
                EXECUTE format('DROP INDEX %I', name);
            END LOOP;
        END $$;
        """
    )
    per_tenant(
        "UPDATE memory_search SET embedding = NULL, embedding_model = NULL, embedding_revision = NULL "
        "WHERE tenant_id = :t AND embedding IS NOT NULL AND vector_dims(embedding) <> 384"
    )
    op.execute("ALTER TABLE memory_search ALTER COLUMN embedding TYPE vector(384)")
    op.execute(
        "CREATE INDEX memory_search_embedding ON memory_search "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    op.execute(SCOPED_VIEW)
    op.execute(f"GRANT SELECT ON memory_search_scoped TO {APP_ROLE}")
