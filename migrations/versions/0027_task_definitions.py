"""Task definitions as data (issue 26, item 1): a tenant's task types, each version immutable once registered.

``PUT /task-definitions/{task_type}`` writes a version's body as given with its canonical sha256, so the same body
again is recognised (200) and another body for a registered version is refused (409). ``seq`` orders a type's
versions by registration: the latest is the one new tasks start on, whatever the version strings say.

Revision ID: 0027
Revises: 0026
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE task_definitions (
            tenant_id text NOT NULL REFERENCES tenants,
            task_type text NOT NULL,
            version text NOT NULL,
            body jsonb NOT NULL,
            body_sha256 text NOT NULL CHECK (body_sha256 ~ '^[0-9a-f]{64}$'),
            seq bigint GENERATED ALWAYS AS IDENTITY,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_type, version)
        );
        CREATE INDEX task_definitions_order ON task_definitions (tenant_id, task_type, seq);
        """
    )
    isolate_by_tenant("task_definitions")


def downgrade() -> None:
    op.execute("DROP TABLE task_definitions")
