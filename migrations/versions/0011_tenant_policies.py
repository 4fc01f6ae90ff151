"""Tenant policies: rules an admin sets for the whole tenant, starting with separation of duties.

One row per tenant that changed a default; a tenant without a row has the defaults (the safe
ones: a report's owner may not approve their own draft).

Revision ID: 0011
Revises: 0010
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE tenant_policies (
            tenant_id text PRIMARY KEY REFERENCES tenants (tenant_id),
            separation_of_duties boolean NOT NULL DEFAULT true,
            updated_at timestamptz NOT NULL DEFAULT now(),
            updated_by text NOT NULL
        )
        """
    )
    isolate_by_tenant("tenant_policies")


def downgrade() -> None:
    op.execute("DROP TABLE tenant_policies")
