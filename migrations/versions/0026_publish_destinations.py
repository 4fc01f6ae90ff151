"""Per-tenant publish destinations (issue 26, item 4): where a task's approved artifact is published.

``publish_destinations``: a tenant's named destinations, ``archive`` (mnemo's artifact store) or ``webhook``
(a signed POST to ``url`` with ``secret``, stored and never returned). Built-in names (``archive``, ``reports``)
need no row.

Revision ID: 0026
Revises: 0025
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE publish_destinations (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            name text NOT NULL,
            kind text NOT NULL CHECK (kind IN ('archive', 'webhook')),
            url text,
            secret text,
            created_by text NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, name),
            CHECK ((kind = 'webhook') = (url IS NOT NULL AND secret IS NOT NULL))
        )
        """
    )
    isolate_by_tenant("publish_destinations")


def downgrade() -> None:
    op.execute("DROP TABLE publish_destinations")
