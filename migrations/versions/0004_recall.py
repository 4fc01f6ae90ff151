"""Recall: vector provenance, usage (hotness) on the search projection, and an HNSW index.

Vectors stay in ``memory_search``, which the deletion purge removes whole, so no
new table holds content or vectors. ``embedding_revision`` is the source
revision a vector was computed from: recall uses a vector only while it still
equals the memory's revision.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE memory_search ADD COLUMN embedding_revision bigint;
        ALTER TABLE memory_search ADD COLUMN active_count integer NOT NULL DEFAULT 0;
        ALTER TABLE memory_search ADD COLUMN last_used_at timestamptz;
        CREATE INDEX memory_search_embedding ON memory_search
            USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
        -- The embedding backlog: rows without a vector from the current model.
        CREATE INDEX memory_search_unembedded ON memory_search (tenant_id, memory_id)
            WHERE embedding IS NULL;
        CREATE INDEX memories_key ON memories (tenant_id, key) WHERE key IS NOT NULL;
        CREATE INDEX audit_log_action ON audit_log (tenant_id, action, audit_id);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX audit_log_action, memories_key, memory_search_unembedded, memory_search_embedding;
        ALTER TABLE memory_search DROP COLUMN last_used_at;
        ALTER TABLE memory_search DROP COLUMN active_count;
        ALTER TABLE memory_search DROP COLUMN embedding_revision;
        """
    )
