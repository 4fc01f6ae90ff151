"""The embedding backlog by index: vectors from another model are found without reading every row.

The backlog is "no vector, or a vector from another model". The first half has its
partial index (``memory_search_unembedded``, migration 0004); the second had none, so
every sweep (every 10 s, per tenant) read all of a tenant's projection rows: ~1 s at a
million memories, spent even when nothing was pending. This index orders vectors by
model, so the rows of any model but the current one are two range scans away.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX memory_search_embedding_model ON memory_search (tenant_id, embedding_model, memory_id) "
        "WHERE embedding IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX memory_search_embedding_model")
