"""Recall: a tenant-scoped view of the search projection for the candidate queries, and room for HOT updates.

Row-level security keeps an operator that is not LEAKPROOF (``@@`` of full text,
``<%`` of pg_trgm) from being used as an index condition, because the policy must
run first (PostgreSQL's security-barrier rule). Under the policy alone every
full-text and trigram candidate query was a sequential scan of the projection,
linear in the tenant's memories. This view applies exactly the policy's
predicate, ``tenant_id = current_setting('mnemo.tenant_id', true)``, as a plain
(non-barrier) condition, so the GIN indexes drive those queries. Without the
setting it returns nothing, as the policy does.

It is owned by the role that runs the migrations; when that role bypasses
row-level security (the default superuser), the view reads the table without the
policy and relies on its own predicate; otherwise the policy applies as well
(correct, only slower). Only SELECT is granted.

The projection also gets ``fillfactor = 80``: every bundle bumps the usage
counters (hotness) of the memories it injects; with room left on each page that
update is HOT and touches no index, instead of inserting a new entry into the
HNSW and both GIN indexes per injected memory. (Existing pages get the room when
the table is next rewritten.)

Revision ID: 0005
Revises: 0004
"""

from alembic import op

from migrations.rls import APP_ROLE

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE VIEW memory_search_scoped AS
            SELECT tenant_id, memory_id, version, search_text, tokens, embedding, embedding_model,
                   embedding_revision, source_revision, active_count, last_used_at
            FROM memory_search
            WHERE tenant_id = current_setting('mnemo.tenant_id', true);
        """
    )
    op.execute(f"GRANT SELECT ON memory_search_scoped TO {APP_ROLE}")
    op.execute("ALTER TABLE memory_search SET (fillfactor = 80)")


def downgrade() -> None:
    op.execute("ALTER TABLE memory_search RESET (fillfactor)")
    op.execute("DROP VIEW memory_search_scoped")
