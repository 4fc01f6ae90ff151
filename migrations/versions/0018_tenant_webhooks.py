"""Observability: the metrics scrape's read policy, bundle events by time, and each tenant's reminder webhook.

- ``metrics_scrape``: a SELECT-only policy on the tables :mod:`memory.governance` counts, open only in a
  transaction that set ``mnemo.metrics_scrape`` (as ``outbox_drain`` does for the outbox): the scrape reads
  aggregates over every tenant in one statement each, instead of one transaction per tenant.
- ``audit_log_bundles_at``: recent MEMORY_BUNDLE_BUILT events, so "recalls of deleted content" stays bounded.
- ``tenant_webhooks``: where a tenant's approval reminders are delivered, and the HMAC secret they are
  signed with (stored, never returned).

Revision ID: 0018
Revises: 0017
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

SCRAPED = ("tasks", "deletion_jobs", "memory_search", "memories", "session_commits", "task_operations",
           "audit_log", "tombstones")


def upgrade() -> None:
    for table in SCRAPED:
        op.execute(
            f"CREATE POLICY metrics_scrape ON {table} FOR SELECT "
            "USING (current_setting('mnemo.metrics_scrape', true) = 'on')"
        )
    op.execute("CREATE INDEX audit_log_bundles_at ON audit_log (at) WHERE action = 'MEMORY_BUNDLE_BUILT'")
    op.execute(
        """
        CREATE TABLE tenant_webhooks (
            tenant_id text PRIMARY KEY REFERENCES tenants (tenant_id),
            url text NOT NULL,
            secret text NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            updated_by text NOT NULL
        )
        """
    )
    isolate_by_tenant("tenant_webhooks")


def downgrade() -> None:
    op.execute("DROP TABLE tenant_webhooks")
    op.execute("DROP INDEX audit_log_bundles_at")
    for table in SCRAPED:
        op.execute(f"DROP POLICY metrics_scrape ON {table}")
