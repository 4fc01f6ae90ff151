"""Recall: a tenant-scoped view of the search projection for the candidate queries; usage counters apart.

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

The usage counters (hotness) move from ``memory_search`` to ``memory_usage``:
every bundle bumps them for the memories it injects, and a projection row
(~2.5 kB with its vector, two or three to a page) has no room for a HOT update,
so each bump inserted new entries into the HNSW and both GIN indexes (~100 ms
for five memories at 100k rows). A narrow row of its own costs a primary-key
update. A foreign key with ``ON DELETE CASCADE`` ties each row to its projection row: whatever
removes the projection (a purge, a re-applied tombstone) removes the usage with it, and a bundle
racing a purge cannot leave a usage row behind (its insert either waits for the delete's outcome or
finds no projection row). The counters move tenant by tenant, in each tenant's context, so an
owner that does not bypass row-level security moves them too.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

from migrations.rls import APP_ROLE, isolate_by_tenant, per_tenant

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE memory_usage (
            tenant_id text NOT NULL,
            memory_id uuid NOT NULL,
            active_count integer NOT NULL DEFAULT 0,
            last_used_at timestamptz,
            PRIMARY KEY (tenant_id, memory_id),
            FOREIGN KEY (tenant_id, memory_id) REFERENCES memory_search (tenant_id, memory_id) ON DELETE CASCADE
        );
        """
    )
    isolate_by_tenant("memory_usage")
    per_tenant(
        "INSERT INTO memory_usage (tenant_id, memory_id, active_count, last_used_at)"
        " SELECT tenant_id, memory_id, active_count, last_used_at FROM memory_search"
        " WHERE tenant_id = :t AND active_count > 0"
    )
    op.execute(
        """
        ALTER TABLE memory_search DROP COLUMN active_count;
        ALTER TABLE memory_search DROP COLUMN last_used_at;
        CREATE VIEW memory_search_scoped AS
            SELECT tenant_id, memory_id, version, search_text, tokens, embedding, embedding_model,
                   embedding_revision, source_revision
            FROM memory_search
            WHERE tenant_id = current_setting('mnemo.tenant_id', true);
        """
    )
    op.execute(f"GRANT SELECT ON memory_search_scoped TO {APP_ROLE}")


def downgrade() -> None:
    op.execute(
        """
        DROP VIEW memory_search_scoped;
        ALTER TABLE memory_search ADD COLUMN active_count integer NOT NULL DEFAULT 0;
        ALTER TABLE memory_search ADD COLUMN last_used_at timestamptz;
        """
    )
    per_tenant(
        "UPDATE memory_search s SET active_count = u.active_count, last_used_at = u.last_used_at"
        " FROM memory_usage u WHERE u.tenant_id = :t AND s.tenant_id = :t AND u.memory_id = s.memory_id"
    )
    op.execute("DROP TABLE memory_usage")

